package proxy

import (
	"errors"
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
)

// Reasons of the answers pollbal makes itself, sent in X-Pollbal-Reason. The last three name
// the client-side errors fasthttp reports, and a backend answer that could not be used.
const (
	reasonNoApp              = "no_app"
	reasonPoolExhausted      = "pool_exhausted"
	reasonBodyTooLarge       = "body_too_large"
	reasonBackendUnreachable = "backend_unreachable"
	reasonBackendTimeout     = "backend_timeout"
	reasonBadResponse        = "bad_response"
	reasonBadRequest         = "bad_request"
	reasonHeadersTooLarge    = "headers_too_large"
	reasonRequestTimeout     = "request_timeout"
	reasonInternalError      = "internal_error"
	reasonQueueFull          = "queue_full"
	reasonQueueTimeout       = "queue_timeout"
)

const textPlain = "text/plain; charset=utf-8"

// answer replaces whatever the response holds (a failed attempt may have left part of a
// backend's answer) with the start of pollbal's own answer: status, reason header and
// text/plain. The caller appends the one-line body.
func answer(ctx *fasthttp.RequestCtx, code int, reason string) *fasthttp.Response {
	r := &ctx.Response
	r.Reset()
	r.SetStatusCode(code)
	r.Header.SetContentType(textPlain)
	r.Header.Set(headerReason, reason)
	return r
}

// answerNoApp is the 404 for a Host that no app matches.
func answerNoApp(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusNotFound, reasonNoApp)
	r.AppendBodyString("no app matches this host\n")
}

// answerExhausted is the fail-closed 503 for an app whose pool (and default, where allowed) has
// no available candidate.
func answerExhausted(ctx *fasthttp.RequestCtx, app *balancer.App) {
	r := answer(ctx, fasthttp.StatusServiceUnavailable, reasonPoolExhausted)
	r.Header.Set(headerRetryAfter, "1")
	appendWhichApp(r, "no available backend: app ", app)
}

// appendWhichApp appends what, then the app's name, service and pool, to the 503 body of a
// request its pool could not take.
func appendWhichApp(r *fasthttp.Response, what string, app *balancer.App) {
	r.AppendBodyString(what)
	r.AppendBodyString(app.Name)
	r.AppendBodyString(", service ")
	r.AppendBodyString(app.Service)
	r.AppendBodyString(", pool ")
	r.AppendBodyString(app.Pool)
	r.AppendBodyString("\n")
}

// answerBodyTooLarge is the 413 for a request body over proxy.max_request_body.
func answerBodyTooLarge(ctx *fasthttp.RequestCtx, limit int) {
	r := answer(ctx, fasthttp.StatusRequestEntityTooLarge, reasonBodyTooLarge)
	r.AppendBodyString("request body larger than ")
	r.AppendBodyString(strconv.Itoa(limit))
	r.AppendBodyString(" bytes\n")
}

// answerFailure answers a forward that did not produce a usable response. It names the backend
// and pool of the last attempt, like a proxied response would.
func answerFailure(ctx *fasthttp.RequestCtx, o outcome, app *balancer.App, last *balancer.Backend, pool string) {
	var r *fasthttp.Response
	switch o {
	case outcomeTimeout:
		r = answer(ctx, fasthttp.StatusGatewayTimeout, reasonBackendTimeout)
		r.AppendBodyString("backend timed out: app ")
	case outcomeBadResponse:
		r = answer(ctx, fasthttp.StatusBadGateway, reasonBadResponse)
		r.AppendBodyString("backend sent an unusable response: app ")
	default:
		r = answer(ctx, fasthttp.StatusBadGateway, reasonBackendUnreachable)
		r.AppendBodyString("backend unreachable: app ")
	}
	r.AppendBodyString(app.Name)
	if last != nil {
		r.Header.Set(headerBackend, last.ID)
		r.Header.Set(headerPool, pool)
		r.AppendBodyString(", backend ")
		r.AppendBodyString(last.ID)
	}
	r.AppendBodyString("\n")
}

// answerServerError is the fasthttp.Server ErrorHandler's answer for requests it could not read:
// 413 for a body over the limit, 431 for headers over the read buffer, 408 for a read timeout,
// else 400. It returns the status.
func answerServerError(ctx *fasthttp.RequestCtx, err error, limit int) int {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		answerBodyTooLarge(ctx, limit)
	case errors.As(err, &small):
		r := answer(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, reasonHeadersTooLarge)
		r.AppendBodyString("request headers too large\n")
	case errors.As(err, &ne) && ne.Timeout():
		r := answer(ctx, fasthttp.StatusRequestTimeout, reasonRequestTimeout)
		r.AppendBodyString("request not received in time\n")
	default:
		r := answer(ctx, fasthttp.StatusBadRequest, reasonBadRequest)
		r.AppendBodyString("malformed request\n")
	}
	return ctx.Response.StatusCode()
}

// answerClientGone answers a request whose client went away, or failed while sending its body
// (up, when the body was streamed, says how): 408 request_timeout when the read timed out, else
// 400 bad_request. The connection is closed after it: the client is gone, or the rest of its
// body is still on the way.
func answerClientGone(ctx *fasthttp.RequestCtx, up *uploadBody) {
	var ne net.Error
	if up != nil && errors.As(up.clientErr, &ne) && ne.Timeout() {
		r := answer(ctx, fasthttp.StatusRequestTimeout, reasonRequestTimeout)
		r.AppendBodyString("request body not received in time\n")
	} else {
		r := answer(ctx, fasthttp.StatusBadRequest, reasonBadRequest)
		r.AppendBodyString("request not received whole\n")
	}
	ctx.SetConnectionClose()
}

// answerInternalError is the 500 for a request whose handling panicked.
func answerInternalError(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusInternalServerError, reasonInternalError)
	r.AppendBodyString("internal error while forwarding\n")
}

// answerQueued is the 503 for a request that could not be queued (full) or waited
// proxy.queue_timeout in the queue without getting a slot.
func answerQueued(ctx *fasthttp.RequestCtx, app *balancer.App, full bool) {
	reason, what := reasonQueueTimeout, "no backend slot freed in time: app "
	if full {
		reason, what = reasonQueueFull, "queue full: app "
	}
	r := answer(ctx, fasthttp.StatusServiceUnavailable, reason)
	r.Header.Set(headerRetryAfter, "1")
	appendWhichApp(r, what, app)
}
