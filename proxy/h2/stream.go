package h2

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// protoHTTP2 is the protocol a stream's request carries, as the access log names it; the
// proxy forwards it to backends as HTTP/1.1.
const protoHTTP2 = "HTTP/2.0"

// serveStream serves one stream: its request becomes a RequestCtx for the handler, and the
// handler's response is written to the stream, its streamed body piece by piece. A stream
// whose client reset it before it started is not served at all.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(*clientConn)
	if c == nil || r.Context().Err() != nil {
		return
	}
	gauge := s.metrics.streams[c.proto]
	gauge.Inc()
	defer gauge.Dec()

	sc := newStreamConn(r.Context(), c, w)
	var conn net.Conn = sc
	if c.tls != nil {
		conn = &tlsStreamConn{StreamConn: sc, state: c.tls}
	}
	ctx := s.getCtx()
	defer s.putCtx(ctx)
	ctx.Init2(conn, s.flog, false)
	fillRequest(&ctx.Request, r, s.requestBody(r, sc))
	s.handler(ctx)
	if writeResponse(w, sc, &ctx.Response, r.Method == http.MethodHead) {
		c.completed()
	}
}

// getCtx takes a RequestCtx from the pool; putCtx resets it and puts it back. The handler
// keeps nothing of a request once it returned and its response was written (a streamed body
// is closed by then); a RequestCtx it hijacked (which HTTP/2 requests never ask for) is not
// reused.
func (s *Server) getCtx() *fasthttp.RequestCtx {
	if ctx, ok := s.ctxs.Get().(*fasthttp.RequestCtx); ok {
		return ctx
	}
	return &fasthttp.RequestCtx{}
}

func (s *Server) putCtx(ctx *fasthttp.RequestCtx) {
	if ctx.Hijacked() {
		return
	}
	ctx.Request.Reset()
	ctx.Response.Reset()
	s.ctxs.Put(ctx)
}

// fillRequest makes req the stream's request r: method, target, :authority as Host, the
// header fields, and the body as a stream the handler reads as the client sends it (it
// buffers or streams it to the backend as it does an HTTP/1.1 body).
//
// body is r's body as the handler reads it (see bodyReader); nil for a request without one.
func fillRequest(req *fasthttp.Request, r *http.Request, body io.Reader) {
	h := &req.Header
	h.SetMethod(r.Method)
	h.SetRequestURI(r.RequestURI)
	h.SetProtocol(protoHTTP2)
	h.SetHost(r.Host)
	for name, values := range r.Header {
		if name == "Host" {
			continue // :authority wins (RFC 9113 §8.3.1)
		}
		for _, v := range values {
			h.Add(name, v)
		}
	}
	if body != nil {
		req.SetBodyStream(body, int(r.ContentLength)) // -1: until END_STREAM, sent chunked
	}
}

// requestBody is the body of r as the handler reads it, nil when r has none: each read must
// bring bytes within clientTimeout (proxy.client_timeout, as for an HTTP/1.1 body), and the
// handler cannot close it (the HTTP/2 server does when the stream ends).
func (s *Server) requestBody(r *http.Request, sc *StreamConn) io.Reader {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	return &bodyReader{r: r.Body, rc: sc.rc, timeout: s.clientTimeout}
}

// bodyReader reads a stream's request body with a deadline on each read.
type bodyReader struct {
	r       io.Reader
	rc      *http.ResponseController
	timeout time.Duration // 0: none
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.timeout > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	return b.r.Read(p)
}

// writeResponse writes the handler's response to the stream: status, header fields less
// those HTTP/2 forbids, and the body; a streamed body is copied as it arrives and then
// closed (which ends its forward and releases its lease). It reports whether the whole
// response was written.
func writeResponse(w http.ResponseWriter, sc *StreamConn, resp *fasthttp.Response, head bool) bool {
	hdr := w.Header()
	for k, v := range resp.Header.All() {
		name := string(k)
		if connectionSpecific(name) || name == fasthttp.HeaderContentLength {
			continue
		}
		hdr[name] = append(hdr[name], string(v))
	}
	code := resp.StatusCode()
	streamed := resp.IsBodyStream()
	switch n := resp.Header.ContentLength(); {
	case !bodyAllowed(code):
	case streamed || head:
		if n >= 0 {
			hdr.Set(fasthttp.HeaderContentLength, strconv.Itoa(n))
		}
	default:
		hdr.Set(fasthttp.HeaderContentLength, strconv.Itoa(len(resp.Body())))
	}
	w.WriteHeader(code)
	if !streamed {
		if head || !bodyAllowed(code) {
			return sc.flush() == nil
		}
		_, err := w.Write(resp.Body())
		return err == nil
	}
	defer func() { _ = resp.CloseBodyStream() }()
	if err := sc.flush(); err != nil {
		return false
	}
	_, err := copyStream(sc, resp.BodyStream())
	return err == nil
}

// copyStream copies a streamed body to the stream: through its own WriteTo when it has one
// (the proxy's streamed bodies do, with a pooled buffer), else through a buffer of its own.
func copyStream(sc *StreamConn, body io.Reader) (int64, error) {
	if wt, ok := body.(io.WriterTo); ok {
		return wt.WriteTo(sc)
	}
	return io.CopyBuffer(sc, body, make([]byte, 32<<10))
}

// bodyAllowed says whether a response with status code may carry a body.
func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

// connectionSpecific reports the header fields HTTP/2 forbids (RFC 9113 §8.2.2).
func connectionSpecific(name string) bool {
	switch name {
	case fasthttp.HeaderConnection, "Keep-Alive", "Proxy-Connection", fasthttp.HeaderTransferEncoding, fasthttp.HeaderUpgrade:
		return true
	}
	return false
}

// StreamConn is the connection a stream's RequestCtx sees: writes go to the stream's body,
// each flushed (so a streamed response reaches the client as it comes), nothing is read from
// it, closing it does nothing, and its addresses are the client connection's. Gone reports a
// stream whose client reset it or whose connection ended, for the proxy's checks on clients
// that went away. It is used by the stream's handler goroutine, but for Gone (any goroutine).
type StreamConn struct {
	ctx  context.Context
	conn net.Conn
	w    http.ResponseWriter
	rc   *http.ResponseController
}

func newStreamConn(ctx context.Context, c *clientConn, w http.ResponseWriter) *StreamConn {
	return &StreamConn{ctx: ctx, conn: c, w: w, rc: http.NewResponseController(w)}
}

// Gone reports whether the stream's client reset it or went away.
func (s *StreamConn) Gone() bool { return s.ctx.Err() != nil }

// Write writes p to the stream's body and flushes it.
func (s *StreamConn) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, s.flush()
}

func (s *StreamConn) flush() error { return s.rc.Flush() }

// Read reads nothing: a stream's request body is the request's body stream.
func (s *StreamConn) Read([]byte) (int, error) { return 0, io.EOF }

// Close does nothing: the stream ends when its handler returns.
func (s *StreamConn) Close() error { return nil }

func (s *StreamConn) LocalAddr() net.Addr              { return s.conn.LocalAddr() }
func (s *StreamConn) RemoteAddr() net.Addr             { return s.conn.RemoteAddr() }
func (s *StreamConn) SetDeadline(time.Time) error      { return nil }
func (s *StreamConn) SetReadDeadline(time.Time) error  { return nil }
func (s *StreamConn) SetWriteDeadline(time.Time) error { return nil }

// tlsStreamConn is a StreamConn on a TLS connection: fasthttp's RequestCtx.IsTLS looks for
// these two methods.
type tlsStreamConn struct {
	*StreamConn
	state *tls.ConnectionState
}

func (t *tlsStreamConn) Handshake() error                     { return nil }
func (t *tlsStreamConn) ConnectionState() tls.ConnectionState { return *t.state }

// StreamGone reports, for a connection a RequestCtx saw, whether it is an HTTP/2 stream
// (isStream) and then whether its client went away.
func StreamGone(nc net.Conn) (gone, isStream bool) {
	switch c := nc.(type) {
	case *StreamConn:
		return c.Gone(), true
	case *tlsStreamConn:
		return c.Gone(), true
	}
	return false, false
}
