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

	st := s.getStream()
	defer s.putStream(st)
	sc, conn := newStreamConn(r.Context(), c, w)
	ctx := &st.ctx
	ctx.Init2(conn, s.flog, false)
	fillRequest(&ctx.Request, r, s.requestBody(r, st, w))
	s.handler(ctx)
	if writeResponse(w, sc, &ctx.Response, r.Method == http.MethodHead, &st.hdr) {
		c.completed()
	}
}

// stream is what serving one stream takes beyond what the HTTP/2 server gives: the
// RequestCtx the handler runs on, its request body's reader and the response header's
// buffers. Streams are pooled, so that a stream costs none of these. The connection the
// handler sees is not pooled: the proxy's watchdog may ask it whether its client went away
// after the stream ended, and must not then find another stream's answer (newStreamConn).
type stream struct {
	ctx  fasthttp.RequestCtx
	body bodyReader
	hdr  headerBuf
}

// getStream takes a stream from the pool; putStream resets it and puts it back. The handler
// keeps nothing of a request once it returned and its response was written (a streamed body
// is closed by then); a RequestCtx it hijacked (which HTTP/2 requests never ask for) is not
// reused.
func (s *Server) getStream() *stream {
	if st, ok := s.streams.Get().(*stream); ok {
		return st
	}
	return &stream{}
}

func (s *Server) putStream(st *stream) {
	if st.ctx.Hijacked() {
		return
	}
	st.ctx.Request.Reset()
	st.ctx.Response.Reset()
	st.body = bodyReader{}
	st.hdr.reset()
	s.streams.Put(st)
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
func (s *Server) requestBody(r *http.Request, st *stream, w http.ResponseWriter) io.Reader {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	st.body = bodyReader{r: r.Body, w: w, timeout: s.clientTimeout}
	return &st.body
}

// bodyReader reads a stream's request body with a deadline on each read.
type bodyReader struct {
	r       io.Reader
	w       http.ResponseWriter // sets the read deadline (x/net's does; others may not)
	timeout time.Duration       // 0: none
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.timeout > 0 {
		if d, ok := b.w.(interface{ SetReadDeadline(time.Time) error }); ok {
			_ = d.SetReadDeadline(time.Now().Add(b.timeout))
		}
	}
	return b.r.Read(p)
}

// writeResponse writes the handler's response to the stream: status, header fields less
// those HTTP/2 forbids, and the body; a streamed body is copied as it arrives and then
// closed (which ends its forward and releases its lease). hb is the stream's scratch space
// for the header fields. It reports whether the whole response was written.
//
// A whole body is written without a flush, so that the HTTP/2 server sends it with the
// header block and END_STREAM once the handler returns. A streamed body of known length is
// flushed piece by piece but for its last piece, which goes out with END_STREAM.
func writeResponse(w http.ResponseWriter, sc *StreamConn, resp *fasthttp.Response, head bool, hb *headerBuf) bool {
	code := resp.StatusCode()
	streamed := resp.IsBodyStream()
	length := -1
	switch n := resp.Header.ContentLength(); {
	case !bodyAllowed(code):
	case streamed || head:
		length = n
	default:
		length = len(resp.Body())
	}
	hb.fill(w.Header(), &resp.Header, length)
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
	sc.left = int64(length)
	_, err := copyStream(sc, resp.BodyStream())
	return err == nil
}

// headerBuf turns a fasthttp response header into the HTTP/2 server's http.Header with two
// allocations whatever the number of fields: one string holding every name and value, and
// one slice holding every value. It is used by the stream's handler goroutine only.
type headerBuf struct {
	buf  []byte
	ends []int // where each name and each value ends in buf, in the order appended
}

// fill sets hdr to the fields of h less those HTTP/2 forbids, and Content-Length to length
// when it is 0 or more. The strings are copies: hb may be reset and refilled while hdr lives.
func (hb *headerBuf) fill(hdr http.Header, h *fasthttp.ResponseHeader, length int) {
	for k, v := range h.All() {
		if connectionSpecific(k) || string(k) == fasthttp.HeaderContentLength {
			continue
		}
		hb.buf = append(hb.buf, k...)
		hb.ends = append(hb.ends, len(hb.buf))
		hb.buf = append(hb.buf, v...)
		hb.ends = append(hb.ends, len(hb.buf))
	}
	fields := len(hb.ends) / 2
	if length >= 0 {
		hb.buf = strconv.AppendInt(hb.buf, int64(length), 10)
		fields++
	}
	all := string(hb.buf)
	values := make([]string, fields)
	from := 0
	for i := 0; i < len(hb.ends); i += 2 {
		name, j := all[from:hb.ends[i]], i/2
		values[j] = all[hb.ends[i]:hb.ends[i+1]]
		from = hb.ends[i+1]
		// A name that comes more than once keeps every value; the slices are capped so
		// that appending to one never writes over the next.
		if prev, ok := hdr[name]; ok {
			hdr[name] = append(prev, values[j])
		} else {
			hdr[name] = values[j : j+1 : j+1]
		}
	}
	if length >= 0 {
		values[fields-1] = all[from:]
		hdr[fasthttp.HeaderContentLength] = values[fields-1:]
	}
}

func (hb *headerBuf) reset() {
	hb.buf = hb.buf[:0]
	hb.ends = hb.ends[:0]
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
func connectionSpecific(name []byte) bool {
	switch string(name) {
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
	left int64 // bytes of a streamed body of known length still to come; -1: unknown
}

// newStreamConn is the connection of a stream of c: sc, and conn as the handler sees it,
// which is sc on a TLS connection's tlsStreamConn. One allocation either way; never reused,
// so that Gone stays true once the stream ended.
func newStreamConn(ctx context.Context, c *clientConn, w http.ResponseWriter) (sc *StreamConn, conn net.Conn) {
	if c.tls != nil {
		t := &tlsStreamConn{StreamConn: StreamConn{ctx: ctx, conn: c, w: w, left: -1}, state: c.tls}
		return &t.StreamConn, t
	}
	sc = &StreamConn{ctx: ctx, conn: c, w: w, left: -1}
	return sc, sc
}

// Gone reports whether the stream's client reset it or went away.
func (s *StreamConn) Gone() bool { return s.ctx.Err() != nil }

// Write writes p to the stream's body and flushes it, but for the last piece of a body of
// known length: the HTTP/2 server sends that with END_STREAM when the handler returns.
func (s *StreamConn) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	if s.left >= 0 {
		s.left -= int64(n)
		if s.left <= 0 {
			return n, nil
		}
	}
	return n, s.flush()
}

// flush sends what was written to the stream: the HTTP/2 server's writer has FlushError.
func (s *StreamConn) flush() error {
	switch f := s.w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.ErrNotSupported
}

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
	StreamConn
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
