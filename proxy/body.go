package proxy

import (
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/proxy/upstream"
)

// bodyPlan is how a client request's body is forwarded.
type bodyPlan uint8

const (
	bodyBuffered bodyPlan = iota // read whole first: the request may be retried on another backend
	bodyStreamed                 // forwarded as it arrives: never retried once sent
	bodyProbe                    // chunked: read up to the buffer limit to find out
	bodyTooLarge                 // over proxy.max_request_body: 413, nothing forwarded
)

// planRequestBody decides how to forward a request body of contentLength bytes (-1: chunked,
// length unknown) given proxy.buffer_request_body and proxy.max_request_body (0: no limit).
func planRequestBody(contentLength, buffer, limit int) bodyPlan {
	switch {
	case contentLength < 0:
		return bodyProbe
	case limit > 0 && contentLength > limit:
		return bodyTooLarge
	case contentLength <= buffer:
		return bodyBuffered
	}
	return bodyStreamed
}

// planBody gets the client's request body ready to forward. The server reads a body up to
// proxy.buffer_request_body before calling the handler and leaves a larger one (or a chunked
// one) to be read as a stream; planBody reads a body within the buffer limit whole, so that
// the request may be retried, and sets a larger one up to be streamed (returned: the caller
// must not retry it once sent). It answers the request itself when the body is over
// proxy.max_request_body (outcomeBodyTooLarge) or could not be read (outcomeClientGone), and
// reports outcomeOK when the request goes on.
func (p *Proxy) planBody(ctx *fasthttp.RequestCtx, pc *configs.Proxy) (*uploadBody, outcome) {
	req := &ctx.Request
	if !req.IsBodyStream() {
		// Read whole by the server. This check also covers a reload that lowered the limit
		// while the body was being read.
		if pc.MaxRequestBody > 0 && len(req.Body()) > pc.MaxRequestBody {
			answerBodyTooLarge(ctx, pc.MaxRequestBody)
			return nil, outcomeBodyTooLarge
		}
		return nil, outcomeOK
	}
	length := req.Header.ContentLength()
	switch planRequestBody(length, pc.BufferRequestBody, pc.MaxRequestBody) {
	case bodyTooLarge:
		answerBodyTooLarge(ctx, pc.MaxRequestBody)
		ctx.SetConnectionClose() // the body was not read
		return nil, outcomeBodyTooLarge
	case bodyBuffered:
		// The server read at most its first 8 KiB; Body reads the rest. A failed read leaves
		// an error text in the body instead, which cannot be as long as a body this size.
		if len(req.Body()) != length {
			answerClientGone(ctx, nil)
			return nil, outcomeClientGone
		}
		return nil, outcomeOK
	case bodyStreamed:
		up := &uploadBody{p: p, header: &req.Header, src: req.BodyStream(), limit: int64(pc.MaxRequestBody)}
		req.SetBodyStream(up, length)
		return up, outcomeOK
	}
	return p.probeBody(ctx, pc)
}

// probeBody reads a chunked body up to proxy.buffer_request_body: one that ends within it is
// forwarded whole (with a Content-Length), a longer one is streamed, what was read first.
func (p *Proxy) probeBody(ctx *fasthttp.RequestCtx, pc *configs.Proxy) (*uploadBody, outcome) {
	req := &ctx.Request
	src := req.BodyStream()
	buf := p.bufs.Get()
	defer p.bufs.Put(buf)
	var read []byte
	for len(read) <= pc.BufferRequestBody {
		n, err := src.Read(*buf)
		read = append(read, (*buf)[:n]...)
		if pc.MaxRequestBody > 0 && len(read) > pc.MaxRequestBody {
			answerBodyTooLarge(ctx, pc.MaxRequestBody)
			ctx.SetConnectionClose()
			return nil, outcomeBodyTooLarge
		}
		if err == io.EOF {
			req.SetBody(read)
			return nil, outcomeOK
		}
		if err != nil {
			answerClientGone(ctx, &uploadBody{clientErr: err})
			return nil, outcomeClientGone
		}
	}
	up := &uploadBody{p: p, header: &req.Header, prefix: read, src: src, limit: int64(pc.MaxRequestBody)}
	req.SetBodyStream(up, -1)
	return up, outcomeOK
}

// errBodyTooLarge ends a streamed request body that grew past proxy.max_request_body.
var errBodyTooLarge = errors.New("request body over the limit")

// uploadBody is a client's request body streamed to a backend: what was already read (a
// chunked body's first part), then the rest from the client connection. It counts the bytes
// against proxy.max_request_body, and records a failure to read from the client. At the end
// of a chunked body it drops the trailer section the server has just read into header, which
// would otherwise follow the body to the backend unchecked (dropTrailers). It is used by one
// goroutine at a time.
type uploadBody struct {
	p         *Proxy
	header    *fasthttp.RequestHeader // the request's: the server adds a trailer section to it
	prefix    []byte                  // read from the client before the body was planned
	src       io.Reader               // the server's stream of the rest of the body
	read      int64
	limit     int64               // proxy.max_request_body; 0: none
	wc        *upstream.WatchConn // the backend connection written to: waits for the client don't count against it
	clientErr error               // reading from the client failed, or the body grew over the limit
	tooLarge  bool                // the body grew over the limit
}

func (u *uploadBody) Read(p []byte) (int, error) {
	var n int
	var err error
	if len(u.prefix) > 0 {
		n = copy(p, u.prefix)
		u.prefix = u.prefix[n:]
	} else {
		n, err = u.src.Read(p)
	}
	u.read += int64(n)
	if u.limit > 0 && u.read > u.limit {
		u.tooLarge = true
		u.clientErr = errBodyTooLarge
		return 0, errBodyTooLarge
	}
	if err == io.EOF && u.header != nil {
		dropTrailers(u.header)
	}
	if err != nil && err != io.EOF {
		u.clientErr = err
	}
	return n, err
}

// SendOn records the backend connection the body is written to (upstream.Upload).
func (u *uploadBody) SendOn(c *upstream.WatchConn) { u.wc = c }

// ClientFailed reports whether reading the body from the client failed (upstream.Upload).
func (u *uploadBody) ClientFailed() bool { return u.clientErr != nil }

// SupportsBodyWriteTo lets fasthttp's request writer use WriteTo.
func (u *uploadBody) SupportsBodyWriteTo() bool { return true }

// WriteTo copies the body to the backend through a pooled buffer; the backend timeout runs
// only while a piece is being written.
func (u *uploadBody) WriteTo(w io.Writer) (int64, error) {
	var progress func()
	if u.wc != nil {
		progress = u.wc.AwaitClient
	}
	return u.p.bufs.Copy(w, u, progress)
}
