package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Phases of a client connection, in the low bits of clientConn.phase; the bits above count the
// changes, so that the scanner tells a new phase from the same one seen before.
const (
	phaseHeader   = iota // opened, or the next request's first byte arrived: its headers are being read
	phaseBusy            // headers complete: the body, the forward and the response
	phaseIdle            // a keep-alive connection waiting for its next request
	phaseHijacked        // handed over by the handler: no longer timed here
	phaseBits     = 2
	phaseMask     = 1<<phaseBits - 1
	phaseStep     = 1 << phaseBits
)

// I/O flags in the low bits of clientConn.io: a Read or a Write is under way. The bits above
// count the Reads and Writes started and finished, so any progress changes the word.
const (
	ioReading = 1 << 0
	ioWriting = 1 << 1
	ioBits    = 2
	ioStep    = 1 << ioBits
)

// writeChunk bounds one Write on the socket, so that a large response to a slow reader shows
// progress to the scanner every writeChunk bytes: client_timeout is a gap between bytes, not a
// limit on a whole response.
const writeChunk = 64 << 10

// headersEndMark ends an HTTP/1.1 request's header block. fasthttp waits for it (a block ended
// by bare LFs stays unfinished), so the header phase ends when it arrives.
const headersEndMark = "\r\n\r\n"

// clientConn is an accepted client connection, tracked for the connection limit, the client
// timeouts and shutdown. Its state lives in two atomic words that the serving goroutine updates
// without locks or clock reads; one scanner per listener reads them (see scan.go).
//
// Read, Write and the phase changes are made by the connection's serving goroutine; Close may be
// called by any goroutine and is idempotent. It must not be copied.
type clientConn struct {
	net.Conn
	l      *listener
	client clientIP // set before the connection is served; read-only

	phase atomic.Uint64 // phase | changes<<phaseBits
	io    atomic.Uint64 // ioReading|ioWriting | operations<<ioBits
	// matched is how many bytes of headersEndMark ended what was read so far of the request's
	// headers; serving goroutine only.
	matched int
	closed  atomic.Bool
	// upgrade is the upgraded session waiting for fasthttp to hand this connection over: if
	// the connection is closed first, Close ends the session (and releases its lease).
	upgrade atomic.Pointer[upgradeSession]
	// relay is the same for a response to be relayed to an HTTP/1.0 client (relayUntilClose).
	relay atomic.Pointer[relay]

	// secure is the TLS connection on top of this one (TLS listener), nil for plain HTTP; it is
	// set before the connection joins the scanned set and never changes. Its request bytes are seen decrypted (tlsConn.Read),
	// not here. handshook turns true once the handshake is over; rawRead once a byte of it
	// arrived (the serving goroutine's own).
	secure    *tls.Conn
	handshook atomic.Bool
	rawRead   bool
	// tlsVersion and sni are the TLS version and server name the handshake agreed on, for the
	// access log; written by the serving goroutine before handshook turns true, read-only after.
	tlsVersion uint16
	sni        string
	timedOut   atomic.Bool // closed by the scanner for proxy.client_timeout

	// Owned by the scanner, under l.mu.
	rec record
	idx int // position in l.conns; -1 once forgotten
}

func (c *clientConn) Position() *int { return &c.idx }

// Read reads from the client. It marks the start of a request (the first byte after an idle
// wait) and the end of its headers. The first read after a response yields first when the
// proxy is busy (yieldIfBusy): the client has yet to receive the response and send its next
// request.
func (c *clientConn) Read(b []byte) (int, error) {
	if c.phase.Load()&phaseMask == phaseIdle {
		c.l.p.yieldIfBusy()
	}
	c.io.Add(ioStep | ioReading)
	n, err := c.Conn.Read(b)
	c.io.Add(ioStep - ioReading)
	if n > 0 {
		if c.secure == nil {
			c.sawBytes(b[:n])
		} else {
			c.rawRead = true
		}
	}
	return n, err
}

// sawBytes moves the phase on for bytes read: an idle connection starts a request, and the
// request's headers end at headersEndMark.
func (c *clientConn) sawBytes(p []byte) {
	ph := c.phase.Load()
	switch ph & phaseMask {
	case phaseIdle:
		ph = c.setPhase(ph, phaseHeader)
	case phaseHeader:
	default:
		return
	}
	var done bool
	if c.matched, done = headersEnd(c.matched, p); done {
		c.setPhase(ph, phaseBusy)
	}
}

// Write writes to the client in chunks of at most writeChunk bytes.
func (c *clientConn) Write(b []byte) (int, error) {
	var n int
	for len(b) > 0 {
		chunk := b
		if len(chunk) > writeChunk {
			chunk = chunk[:writeChunk]
		}
		c.io.Add(ioStep | ioWriting)
		m, err := c.Conn.Write(chunk)
		c.io.Add(ioStep - ioWriting)
		n += m
		if err != nil {
			return n, err
		}
		b = b[m:]
	}
	return n, nil
}

// Close stops tracking the connection and closes it; later calls do nothing.
func (c *clientConn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.l.forget(c)
	err := c.Conn.Close()
	if s := c.upgrade.Swap(nil); s != nil {
		s.abandon()
	}
	if r := c.relay.Swap(nil); r != nil {
		r.abandon()
	}
	return err
}

// clientTimedOut reports whether the scanner closed c for proxy.client_timeout: a request
// whose client it cut off ended with client_timeout, not client_gone. It is false for nil (a
// connection pollbal's listeners did not accept).
func clientTimedOut(c *clientConn) bool { return c != nil && c.timedOut.Load() }

// NetConn returns the accepted connection itself, for code that needs more than net.Conn.
func (c *clientConn) NetConn() net.Conn { return c.Conn }

// errNoRawConn is SyscallConn's answer for a connection without a file descriptor (an
// in-memory one in tests).
var errNoRawConn = errors.New("client connection has no file descriptor")

// SyscallConn gives access to the socket of the accepted connection (e.g. to see whether the
// client went away without reading from it).
func (c *clientConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoRawConn
}

// setPhase moves the connection from the phase word ph to phase and returns the new word.
func (c *clientConn) setPhase(ph, phase uint64) uint64 {
	next := (ph&^phaseMask + phaseStep) | phase
	c.phase.Store(next)
	if phase != phaseHeader {
		c.matched = 0
	}
	return next
}

// requestStarted is fasthttp's StateActive: the next request's first byte is there (it may have
// been read with the previous request).
func (c *clientConn) requestStarted() {
	if ph := c.phase.Load(); ph&phaseMask == phaseIdle {
		c.setPhase(ph, phaseHeader)
	}
}

// requestServed is fasthttp's StateIdle: the response was written, the next request may come.
func (c *clientConn) requestServed() {
	c.setPhase(c.phase.Load(), phaseIdle)
}

// hijacked is fasthttp's StateHijacked: the handler took the connection over.
func (c *clientConn) hijacked() {
	c.setPhase(c.phase.Load(), phaseHijacked)
}

// handling marks the request as read whole: the handler runs. It covers what the byte scan
// cannot see (a request that was read along with the previous one).
func (c *clientConn) handling() {
	if ph := c.phase.Load(); ph&phaseMask != phaseBusy {
		c.setPhase(ph, phaseBusy)
	}
}

// headersEnd looks for the end of a header block in p, which follows bytes whose last matched
// bytes matched headersEndMark's first ones. It returns how many bytes of the mark end p (when
// not found) and whether the block ended.
func headersEnd(matched int, p []byte) (int, bool) {
	if matched > 0 {
		rest := headersEndMark[matched:]
		k := 0
		for k < len(rest) && k < len(p) && p[k] == rest[k] {
			k++
		}
		if k == len(rest) {
			return 0, true
		}
		if k == len(p) {
			return matched + k, false
		}
	}
	if bytes.Contains(p, []byte(headersEndMark)) {
		return 0, true
	}
	for m := min(len(headersEndMark)-1, len(p)); m > 0; m-- {
		if string(p[len(p)-m:]) == headersEndMark[:m] {
			return m, false
		}
	}
	return 0, false
}

// record is what the scanner remembers of a connection between two scans: the words it saw
// and the latest time the state they show can have begun.
type record struct {
	phase, io uint64
	since     time.Duration
}
