package proxy

import (
	"github.com/valyala/fasthttp"

	"pollbal/internal/accesslog"
)

// Header names of a request's identity: its ID, which pollbal keeps or sets, and its W3C trace
// context, which pollbal passes on unchanged.
const (
	headerRequestID   = "X-Request-Id"
	headerTraceparent = "Traceparent"
)

// requestIDs reads a request's X-Request-Id and traceparent in one pass over its headers. A
// request keeps its X-Request-Id when it carries exactly one and it is valid
// (accesslog.ValidRequestID); otherwise — none, an invalid one, or several, which would leave
// the backend to pick one — every X-Request-Id goes and a new ID, made in fresh, is set in
// their place. It returns the request's ID, which points into the header or into fresh, and
// the first traceparent (nil when there is none), which the caller only reads.
func requestIDs(h *fasthttp.RequestHeader, fresh *[accesslog.NewRequestIDLen]byte) (id, traceparent []byte) {
	seen := 0
	for k, v := range h.All() {
		switch {
		case len(k) == len(headerRequestID) && equalFold(k, headerRequestID):
			if seen == 0 {
				id = v
			}
			seen++
		case traceparent == nil && len(k) == len(headerTraceparent) && equalFold(k, headerTraceparent):
			traceparent = v
		}
	}
	if seen == 1 && accesslog.ValidRequestID(id) {
		return id, traceparent
	}
	id = accesslog.AppendNewRequestID(fresh[:0], nil)
	if seen > 0 {
		h.Del(headerRequestID)
	}
	// The name is canonical, and the header has none of that name any more.
	h.SetCanonical(viewBytes(headerRequestID), id)
	return id, traceparent
}

// setResponseID sets the request's ID on an answer: the one pollbal made, or a backend's
// answer whose own X-Request-Id (if any) stripResponseHeaders removed, so that the client sees
// the ID that was forwarded and logged.
func setResponseID(h *fasthttp.ResponseHeader, id []byte) {
	h.SetCanonical(viewBytes(headerRequestID), id)
}
