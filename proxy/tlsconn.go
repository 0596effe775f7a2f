package proxy

import (
	"crypto/tls"
	"net"
	"time"
)

// tlsConn is a client connection of the TLS listener: TLS on top of the tracked clientConn, so
// that the connection limit, the client timeouts and shutdown apply to it as to a plain one.
// The handshake happens in the header phase (a new connection starts there), so it must be over
// within proxy.header_timeout. The request's headers are found in the decrypted bytes. Like
// clientConn, Read and Write belong to the serving goroutine; it must not be copied.
type tlsConn struct {
	*tls.Conn
	cc *clientConn
}

// Read reads decrypted bytes and moves the tracked connection's phase on for them.
func (c *tlsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.cc.handshook.Store(true)
		c.cc.sawBytes(b[:n])
	}
	return n, err
}

// trackedConn returns the clientConn under a connection the server hands to pollbal, or nil.
func trackedConn(nc net.Conn) *clientConn {
	switch c := nc.(type) {
	case *clientConn:
		return c
	case *tlsConn:
		return c.cc
	}
	return nil
}

// write408 answers a request whose headers came too late. Over TLS it can only be written once
// the handshake is over (a handshake that is still going is simply cut), and it goes through
// TLS, which allows one Write alongside the serving goroutine's blocked Read.
func (c *clientConn) write408() {
	if c.secure == nil {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
		writeHeaderTimeout(c.Conn)
		return
	}
	if !c.handshook.Load() {
		return
	}
	_ = c.secure.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
	writeHeaderTimeout(c.secure)
}
