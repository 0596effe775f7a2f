package proxy

import (
	"net"
	"syscall"

	"pollbal/proxy/h2"
)

// clientCheckEvery is how many watchdog scans pass between two checks of the clients of the
// forwards in progress: every 100 ms, so a client that went away ends its forward (backend
// connection closed, lease released) well within a second.
const clientCheckEvery = 4

// clientCheck is one forward's backend connection and its client connection, as found by a
// check.
type clientCheck struct {
	backend *watchConn
	client  net.Conn
}

// checkClients closes the backend connection of every forward whose client connection has
// been closed or reset. A client that shut down only its write side looks the same from here
// (the next read is the end of input) and counts as gone: an HTTP client that half-closes
// while its request is in flight has left. fasthttp does not read a client connection while its request is being
// handled or its response written, so nothing else would notice before the backend answers (a
// failed write to the client notices only once there is something to write). The reads,
// failures and the lease release then follow from the closed backend connection, as for a
// backend timeout. It uses checks as scratch space, which it returns.
func (w *watchdog) checkClients(checks []clientCheck) []clientCheck {
	w.mu.Lock()
	for _, c := range w.conns {
		c.cmu.Lock()
		if c.client != nil {
			checks = append(checks, clientCheck{backend: c, client: c.client})
		}
		c.cmu.Unlock()
	}
	w.mu.Unlock()
	for i, ch := range checks {
		checkOne(ch)
		checks[i] = clientCheck{}
	}
	return checks
}

// checkOne closes ch's backend connection when ch's client went away and is still the client
// of the connection's forward. The mark (gone) is stored under cmu with that check, and a
// forward's end clears the client under cmu before it reads the mark: a connection still
// serving the gone client is marked before that forward ends, so it is closed there rather
// than pooled for another forward (watchdog.go, invariant 3).
func checkOne(ch clientCheck) {
	if !clientGone(ch.client) {
		return
	}
	c := ch.backend
	c.cmu.Lock()
	same := c.client == ch.client
	if same {
		c.gone.Store(true)
	}
	c.cmu.Unlock()
	if same {
		_ = c.Close()
	}
}

// clientGone reports whether the peer of c has closed or reset the connection, without
// consuming anything: it peeks at the socket (recv with MSG_PEEK|MSG_DONTWAIT). Pipelined
// bytes waiting to be read mean the client is still there. A connection that is not a socket
// (an in-memory one in tests), or is wrapped without a way to reach the socket, never counts
// as gone. A wrapper is unwrapped through its NetConn method.
func clientGone(c net.Conn) bool {
	if tc, ok := c.(*tlsConn); ok {
		return peerClosed(tc.cc)
	}
	if gone, ok := h2.StreamGone(c); ok {
		return gone
	}
	for range 8 {
		if sc, ok := c.(syscall.Conn); ok {
			return socketGone(sc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = u.NetConn()
	}
	return false
}
