package proxy

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// ambiguousFraming reports whether a request came with both Transfer-Encoding and
// Content-Length. fasthttp frames such a request by Transfer-Encoding alone and closes the
// connection after it (RFC 9112 §6.3), which is safe for pollbal itself; but the two headers
// together are the signature of a request-smuggling attempt aimed at whichever server reads the
// other one, so pollbal refuses it outright (RFC 9112 §6.1 allows either). By the time the
// handler runs, fasthttp has replaced both with the length of the body it read, so only the raw
// header block tells; it is looked at only for requests whose connection closes after them
// (fasthttp marks these so), which keep-alive traffic never is.
func ambiguousFraming(h *fasthttp.RequestHeader) bool {
	if !h.ConnectionClose() {
		return false
	}
	cl, te := headerLines(h.RawHeaders())
	return cl && te
}

// headerLines reports whether a raw header block has a Content-Length line and a
// Transfer-Encoding line (names in any case).
func headerLines(raw []byte) (contentLength, transferEncoding bool) {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		i := bytes.IndexByte(line, ':')
		if i < 0 {
			continue
		}
		switch name := trimSpace(line[:i]); {
		case equalFold(name, "Content-Length"):
			contentLength = true
		case equalFold(name, "Transfer-Encoding"):
			transferEncoding = true
		}
	}
	return contentLength, transferEncoding
}

// answerAmbiguousFraming is the 400 for a request whose body framing is ambiguous; the
// connection is closed after it, since where the next request would start is the question.
func answerAmbiguousFraming(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusBadRequest, reasonBadRequest)
	r.AppendBodyString("malformed request: both Content-Length and Transfer-Encoding\n")
	r.SetConnectionClose()
}
