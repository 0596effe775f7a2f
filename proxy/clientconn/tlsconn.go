package clientconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// TLSConn is a client connection of the TLS listener: TLS on top of the tracked Conn, so
// that the connection limit, the client timeouts and shutdown apply to it as to a plain one.
// The handshake happens in the header phase (a new connection starts there), so it must be over
// within proxy.header_timeout. The request's headers are found in the decrypted bytes. Like
// Conn, Read and Write belong to the serving goroutine; it must not be copied.
type TLSConn struct {
	*tls.Conn
	cc    *Conn
	shook bool // the handshake is over; the serving goroutine's own
}

// Read reads decrypted bytes and moves the tracked connection's phase on for them. The first
// Read runs the handshake.
func (c *TLSConn) Read(b []byte) (int, error) {
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
// never answered or counted as a request (the proxy's error handler). Two failures are not counted
// here: a client that closed without sending a byte made no handshake, and a connection that
// pollbal closed itself (header_timeout, counted where it is cut; shutdown) failed no handshake
// of the client's.
func (c *TLSConn) handshake() error {
	err := c.Conn.Handshake()
	if err == nil {
		c.shook = true
		st := c.Conn.ConnectionState()
		c.cc.tlsVersion, c.cc.sni = st.Version, st.ServerName
		c.cc.handshook.Store(true)
		return nil
	}
	if !c.cc.closed.Load() && (c.cc.rawRead || !errors.Is(err, io.EOF)) {
		c.cc.l.hooks.Metrics.TLSHandshakeErrors.Inc()
	}
	return err
}

// HandOver is for a connection fasthttp hands over after ALPN chose h2: it completes the
// handshake's bookkeeping, and the scanner stops timing the connection, whose new server has
// timeouts of its own.
func (c *TLSConn) HandOver() error {
	if !c.shook {
		if err := c.handshake(); err != nil {
			return err
		}
	}
	c.cc.Hijacked()
	return nil
}

// Tracked returns the Conn under a connection the server hands to pollbal, or nil.
func Tracked(nc net.Conn) *Conn {
	switch c := nc.(type) {
	case *Conn:
		return c
	case *TLSConn:
		return c.cc
	case *PrefaceConn:
		return c.Conn
	}
	return nil
}

// WriteAnswer writes an answer of the server's own (write writes it to w) to a connection whose
// request headers came too late, bounded by headerTimeoutWrite. Over TLS it can only be
// written once the handshake is over (a handshake that is still going is simply cut), and it
// goes through TLS, which allows one Write alongside the serving goroutine's blocked Read.
func (c *Conn) WriteAnswer(write func(w io.Writer)) {
	if c.secure == nil {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
		write(c.Conn)
		return
	}
	if !c.handshook.Load() {
		return
	}
	_ = c.secure.SetWriteDeadline(time.Now().Add(headerTimeoutWrite))
	write(c.secure)
}

// Handshaken reports whether the TLS handshake is over (the serving goroutine's view).
func (c *TLSConn) Handshaken() bool { return c.shook }
