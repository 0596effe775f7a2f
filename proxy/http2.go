package proxy

import (
	"bytes"
	"net"

	"github.com/valyala/fasthttp"

	"pollbal/proxy/clientconn"
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
	p.clientHooks.H2C = cfg.HTTP2.H2C
	return err
}

// serveHTTP2 serves a TLS connection whose client chose h2 by ALPN; fasthttp hands it over
// after the handshake. The listener's scanner stops timing it (the handshake was its header
// phase): the HTTP/2 server's idle and write timeouts take over, and Shutdown drains it
// through the HTTP/2 server.
func (p *Proxy) serveHTTP2(c net.Conn) error {
	tc, ok := c.(*clientconn.TLSConn)
	if !ok {
		return c.Close()
	}
	if err := tc.HandOver(); err != nil {
		return err
	}
	p.h2.ServeConn(tc, h2.ProtoTLS, false)
	return nil
}

// isHTTP10 reports an HTTP/1.0 request (HTTP/2 streams are neither 1.0 nor 1.1).
func isHTTP10(h *fasthttp.RequestHeader) bool {
	return !h.IsHTTP11() && !bytes.Equal(h.Protocol(), []byte(protoHTTP2))
}

// serveH2C serves a plain connection that opened with the HTTP/2 client preface
// (http2.h2c); fasthttp hands it over as it does an h2 one, see clientconn.PrefaceConn.
func (p *Proxy) serveH2C(c net.Conn) error {
	pc, ok := c.(*clientconn.PrefaceConn)
	if !ok {
		return c.Close()
	}
	pc.Hijacked() // the HTTP/2 server's timeouts take over from the scanner's
	p.h2.ServeConn(pc, h2.ProtoCleartext, false)
	return nil
}

// isTLS reports a request that came over TLS: on the TLS listener, or as an HTTP/2 stream of
// a TLS connection. fasthttp's IsTLS would also take a PrefaceConn for one.
func isTLS(ctx *fasthttp.RequestCtx) bool {
	switch ctx.Conn().(type) {
	case *clientconn.TLSConn:
		return true
	case *clientconn.Conn, *clientconn.PrefaceConn:
		return false
	}
	return ctx.IsTLS()
}

// clientGone tells the watchdog whether a forward's client went away: an HTTP/2 stream reset
// by its client, or a client connection closed or reset (clientconn.Gone).
func clientGone(c net.Conn) bool {
	if gone, ok := h2.StreamGone(c); ok {
		return gone
	}
	return clientconn.Gone(c)
}
