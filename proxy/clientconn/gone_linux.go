package clientconn

import "syscall"

// socketGone peeks at a socket: end of stream or an error other than "nothing to read yet"
// mean the peer is gone, and so does a socket already closed on our side. A connection that
// has no socket to give (SyscallConn fails) cannot be checked and never counts as gone.
func SocketGone(sc syscall.Conn) bool {
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var gone bool
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, errno := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errno == syscall.EAGAIN || errno == syscall.EINTR:
		case errno != nil:
			gone = true
		case n == 0:
			gone = true
		}
		return true // never wait: this is a peek
	})
	return gone || err != nil
}
