package proxy

import (
	"io"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
)

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
	buf := p.bufs.get()
	defer p.bufs.put(buf)
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
