package proxy

import (
	"github.com/valyala/fasthttp"
)

// reasonMethodNotAllowed is the reason of the 405 for a CONNECT or TRACE request.
const reasonMethodNotAllowed = "method_not_allowed"

// allowedMethods is the Allow header of that 405 (RFC 9110 §15.5.6 requires one): the standard
// methods pollbal forwards. Any other method is forwarded too; CONNECT and TRACE are the only
// ones refused.
const allowedMethods = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"

// refusedMethod reports whether pollbal refuses a request method itself. CONNECT asks for a
// tunnel to a host of the client's choosing: pollbal is not a forward proxy, so it never passes
// one to a backend (which might open that tunnel). TRACE asks the backend to send the request
// back as it received it, cookies and credentials included, which a script in a browser could
// then read (cross-site tracing); nothing behind a load balancer needs it. Methods are
// case-sensitive, but lower-case ones are refused too: no backend should be asked to decide
// what they mean.
func refusedMethod(method []byte) bool {
	return equalFold(method, fasthttp.MethodConnect) || equalFold(method, fasthttp.MethodTrace)
}

// answerMethodNotAllowed is the 405 for a refused method. The connection is closed after it:
// a client that asked for a tunnel may already be sending what it meant to send through it.
func answerMethodNotAllowed(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusMethodNotAllowed, reasonMethodNotAllowed)
	r.Header.Set("Allow", allowedMethods)
	r.AppendBodyString("method not allowed: pollbal forwards neither CONNECT nor TRACE\n")
	r.SetConnectionClose()
}

// expectContinue decides, from the headers alone, whether a request that asked for
// "Expect: 100-continue" may send its body (fasthttp's Server.ExpectHandler). A body whose
// Content-Length already exceeds proxy.max_request_body, and a refused method, are answered at
// once, before any "100 Continue", so the client never starts sending what would be thrown
// away; the server then closes the connection. The handler does not run for such a request,
// so it is counted here.
func (p *Proxy) expectContinue(ctx *fasthttp.RequestCtx) int {
	start := p.clock.Now()
	snap := p.bal.Snapshot()
	limit := snap.Config().Proxy.MaxRequestBody
	switch {
	case refusedMethod(ctx.Request.Header.Method()):
		answerMethodNotAllowed(ctx)
	case limit > 0 && ctx.Request.Header.ContentLength() > limit:
		answerBodyTooLarge(ctx, limit)
	default:
		return fasthttp.StatusContinue
	}
	e := p.beginEntry(ctx, snap.Config(), start)
	code := ctx.Response.StatusCode()
	app := snap.Route(ctx.Host())
	e.routed(app)
	p.requests.of(snap, app).Count(code)
	p.answers.count(code, &ctx.Response.Header)
	p.finish(ctx, e, p.clock.Now()-start, true, false)
	return code
}
