package clientconn

import (
	"syscall"
	"unsafe"
)

// tcpCloseWait is the Linux TCP state of a socket whose peer has closed its side (sent FIN).
const tcpCloseWait = 8

// peerClosed reports whether the peer of a TLS client's socket has gone: as socketGone, or
// with its FIN received behind bytes that are still unread. A TLS client that closes sends a
// close_notify record first, so the peek alone would see bytes waiting and keep it.
func peerClosed(sc syscall.Conn) bool {
	if SocketGone(sc) {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var info syscall.TCPInfo
	size := uint32(syscall.SizeofTCPInfo)
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	}); err != nil || errno != 0 {
		return false
	}
	return info.State == tcpCloseWait
}
