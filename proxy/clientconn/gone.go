package clientconn

import (
	"net"
	"syscall"
)

// Gone reports whether the peer of c has closed or reset the connection, without
// consuming anything: it peeks at the socket (recv with MSG_PEEK|MSG_DONTWAIT). Pipelined
// bytes waiting to be read mean the client is still there. A connection that is not a socket
// (an in-memory one in tests), or is wrapped without a way to reach the socket, never counts
// as gone. A wrapper is unwrapped through its NetConn method.
func Gone(c net.Conn) bool {
	if tc, ok := c.(*TLSConn); ok {
		return peerClosed(tc.cc)
	}
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			return SocketGone(sc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = u.NetConn()
	}
	return false
}
