package proxy

import (
	"net"
	"syscall"
)

// socketPeek tells whether a socket has something to read at once (bytes, its end, or an
// error), without consuming anything: a recv with MSG_PEEK|MSG_DONTWAIT. Its function value is
// made once, so a check allocates nothing. It is used by one goroutine at a time and must not be
// copied once set up.
type socketPeek struct {
	rc      syscall.RawConn // nil: the connection has no socket to check
	pending bool
	buf     [1]byte
	fn      func(fd uintptr) bool
}

// init sets p up for c's socket; a connection without one is never found pending.
func (p *socketPeek) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	p.rc, p.fn = rc, p.check
}

// readable reports whether the socket has something to read now. A socket already closed on
// our side counts as readable (it cannot be used either).
func (p *socketPeek) readable() bool {
	if p.rc == nil {
		return false
	}
	p.pending = false
	if err := p.rc.Read(p.fn); err != nil {
		return true
	}
	return p.pending
}

func (p *socketPeek) check(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	// Bytes (err nil, n > 0), the end of the stream (err nil, n 0) or a failure: all pending.
	p.pending = err != syscall.EAGAIN && err != syscall.EINTR
	return true // never wait: this is a peek
}
