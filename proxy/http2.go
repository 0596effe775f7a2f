package proxy

import (
	"bytes"
	"crypto/tls"
	"net"

	"github.com/valyala/fasthttp"

	"pollbal/proxy/h2"
)

// protoHTTP2 is the protocol of a request that came as an HTTP/2 stream (package h2 sets it).
const protoHTTP2 = "HTTP/2.0"

// newHTTP2 builds the HTTP/2 server from the configuration at start (the http2 section needs
// a restart to change): its streams run Handler, as HTTP/1.1 requests do.
func (p *Proxy) newHTTP2(o Options) error {
	cfg := o.Balancer.Snapshot().Config()
	var err error
	p.h2, err = h2.New(h2.Options{
		Handler:              p.Handler,
		MaxConcurrentStreams: cfg.HTTP2.MaxConcurrentStreams,
		MaxHeaderBytes:       cfg.HTTP2.MaxHeaderBytes,
		IdleTimeout:          cfg.Proxy.IdleTimeout,
		ClientTimeout:        cfg.Proxy.ClientTimeout,
		Logger:               o.Logger,
		Registerer:           o.Registerer,
	})
	p.h2c = cfg.HTTP2.H2C
	return err
}

// serveHTTP2 serves a TLS connection whose client chose h2 by ALPN; fasthttp hands it over
// after the handshake. The listener's scanner stops timing it (the handshake was its header
// phase): the HTTP/2 server's idle and write timeouts take over, and Shutdown drains it
// through the HTTP/2 server.
func (p *Proxy) serveHTTP2(c net.Conn) error {
	tc, ok := c.(*tlsConn)
	if !ok {
		return c.Close()
	}
	if err := tc.handshake(); err != nil {
		return err
	}
	tc.cc.hijacked()
	p.h2.ServeConn(tc, h2.ProtoTLS, false)
	return nil
}

// isHTTP10 reports an HTTP/1.0 request (HTTP/2 streams are neither 1.0 nor 1.1).
func isHTTP10(h *fasthttp.RequestHeader) bool {
	return !h.IsHTTP11() && !bytes.Equal(h.Protocol(), []byte(protoHTTP2))
}

// serveH2C serves a plain connection that opened with the HTTP/2 client preface
// (http2.h2c); fasthttp hands it over as it does an h2 one, see prefaceConn.
func (p *Proxy) serveH2C(c net.Conn) error {
	pc, ok := c.(*prefaceConn)
	if !ok {
		return c.Close()
	}
	pc.hijacked()
	p.h2.ServeConn(pc, h2.ProtoCleartext, false)
	return nil
}

// protoH2C is what prefaceConn reports as negotiated for a connection that opened with the
// HTTP/2 preface, the key of its fasthttp NextProto handler.
const protoH2C = "h2c"

// prefaceConn is a plain client connection of a listener that accepts h2c: fasthttp asks it
// for a handshake before serving it (as it asks a TLS connection), and it answers by reading
// the client's first bytes: when they are the HTTP/2 client preface it reports h2c as the
// negotiated protocol, and fasthttp hands it to serveH2C; otherwise fasthttp serves it as
// HTTP/1.1. Either way, the bytes read are read again first. The peek runs in the header
// phase, so proxy.header_timeout bounds it. Like clientConn, Read belongs to the serving
// goroutine; it must not be copied.
type prefaceConn struct {
	*clientConn
	peeked  []byte // read by Handshake, not yet by Read
	peekErr error  // the read error that ended the peek, returned once peeked is consumed
	proto   string
}

// Handshake reads until the bytes read are the whole preface, or stop being its start.
func (c *prefaceConn) Handshake() error {
	var buf [len(http2Preface)]byte
	n := 0
	for n < len(buf) {
		m, err := c.clientConn.Read(buf[n:])
		n += m
		if string(buf[:n]) != http2Preface[:n] {
			break
		}
		if err != nil {
			c.peekErr = err
			break
		}
	}
	c.peeked = append([]byte(nil), buf[:n]...)
	if string(c.peeked) == http2Preface {
		c.proto = protoH2C
	}
	return nil
}

// ConnectionState reports h2c as negotiated for a connection that opened with the preface.
func (c *prefaceConn) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{NegotiatedProtocol: c.proto}
}

// Read returns the peeked bytes first.
func (c *prefaceConn) Read(b []byte) (int, error) {
	if len(c.peeked) > 0 {
		n := copy(b, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	if err := c.peekErr; err != nil {
		c.peekErr = nil
		return 0, err
	}
	return c.clientConn.Read(b)
}

// http2Preface starts every HTTP/2 connection (RFC 9113 §3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
