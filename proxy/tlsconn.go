package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// tlsConn is a client connection of the TLS listener: TLS on top of the tracked clientConn, so
// that the connection limit, the client timeouts and shutdown apply to it as to a plain one.
// The handshake happens in the header phase (a new connection starts there), so it must be over
// within proxy.header_timeout. The request's headers are found in the decrypted bytes. Like
// clientConn, Read and Write belong to the serving goroutine; it must not be copied.
type tlsConn struct {
	*tls.Conn
	cc    *clientConn
	shook bool // the handshake is over; the serving goroutine's own
}

// Read reads decrypted bytes and moves the tracked connection's phase on for them. The first
// Read runs the handshake.
func (c *tlsConn) Read(b []byte) (int, error) {
	if !c.shook {
		if err := c.handshake(); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.cc.sawBytes(b[:n])
	}
	return n, err
}

// handshake runs the TLS handshake before the first read (tls.Conn.Read would run it too), so
// that its failure is known for what it is: counted in pollbal_tls_handshake_errors_total, and
// never answered or counted as a request (Proxy.errorHandler). Two failures are not counted
// here: a client that closed without sending a byte made no handshake, and a connection that
// pollbal closed itself (header_timeout, counted where it is cut; shutdown) failed no handshake
// of the client's.
func (c *tlsConn) handshake() error {
	err := c.Conn.Handshake()
	if err == nil {
		c.shook = true
		st := c.Conn.ConnectionState()
		c.cc.tlsVersion, c.cc.sni = st.Version, st.ServerName
		c.cc.handshook.Store(true)
		return nil
	}
	if !c.cc.closed.Load() && (c.cc.rawRead || !errors.Is(err, io.EOF)) {
		c.cc.l.p.connMetrics.tlsHandshakeErrors.Inc()
	}
	return err
}

// trackedConn returns the clientConn under a connection the server hands to pollbal, or nil.
func trackedConn(nc net.Conn) *clientConn {
	switch c := nc.(type) {
	case *clientConn:
		return c
	case *tlsConn:
		return c.cc
	case *prefaceConn:
		return c.clientConn
	}
	return nil
}

// isTLS reports a request that came over TLS: on the TLS listener, or as an HTTP/2 stream of
// a TLS connection. fasthttp's IsTLS would also take a prefaceConn for one.
func isTLS(ctx *fasthttp.RequestCtx) bool {
	switch ctx.Conn().(type) {
	case *tlsConn:
		return true
	case *clientConn, *prefaceConn:
		return false
	}
	return ctx.IsTLS()
}

// write408 answers a request whose headers came too late, with the request ID pollbal gave it.
// Over TLS it can only be written once the handshake is over (a handshake that is still going
// is simply cut), and it goes through TLS, which allows one Write alongside the serving
// goroutine's blocked Read.
func (c *clientConn) write408(requestID []byte) {
	if c.secure == nil {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
		writeHeaderTimeout(c.Conn, requestID)
		return
	}
	if !c.handshook.Load() {
		return
	}
	_ = c.secure.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
	writeHeaderTimeout(c.secure, requestID)
}
