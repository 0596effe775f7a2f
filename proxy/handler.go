package proxy

import (
	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/proxy/clientconn"
)

// Handler serves one client request: route by Host, lease a backend, forward, report, release
// (a refused method, userinfo in the target or Host, or an ambiguous body framing is answered
// before any of that). It routes on one balancer snapshot and leases from it, retries
// included; a lease the queue hands over comes from the snapshot current then (Balancer.Wait),
// which the forward goes on with. Every request gets an X-Request-Id and an access-log entry
// (logentry.go), which the handler finishes when it answers, unless a streamed body or an
// upgraded connection takes it over. It never keeps ctx after returning.
func (p *Proxy) Handler(ctx *fasthttp.RequestCtx) {
	start := p.clock.Now()
	p.handling.Add(1)
	defer p.handling.Add(-1)
	if c := clientconn.Tracked(ctx.Conn()); c != nil {
		c.Handling()
	}
	snap := p.bal.Snapshot()
	e := p.beginEntry(ctx, snap.Config(), start)
	app := snap.Route(ctx.Host())
	e.routed(app)
	own, gone := true, false // the answer is pollbal's own, not a backend's; no answer at all
	switch {
	case refusedMethod(ctx.Request.Header.Method()):
		answerMethodNotAllowed(ctx)
	case hasUserinfo(ctx.Request.Header.Host(), ctx.Request.Header.RequestURI(), ctx.URI()):
		answerUserinfo(ctx)
	case ambiguousFraming(&ctx.Request.Header):
		answerAmbiguousFraming(ctx)
	case app == nil:
		answerNoApp(ctx)
	default:
		switch p.forwardSafely(ctx, snap, app, e) {
		case endStreamed:
			// A streamed body: its end records the duration (upstream.ResponseBody), and finishes e.
			if p.stopping.Load() {
				ctx.SetConnectionClose()
			}
			p.requests.of(snap, app).Count(ctx.Response.StatusCode())
			return
		case endUpgraded:
			// The upgraded connection has e; the request ends with its 101.
			p.requests.of(snap, app).Done(ctx.Response.StatusCode(), p.clock.Now()-start)
			return
		case endGone:
			gone = true // no request was answered: forward counted a client gone
		case endRelayed:
			own = false
		}
	}
	if p.stopping.Load() {
		ctx.SetConnectionClose()
	}
	code := ctx.Response.StatusCode()
	took := p.clock.Now() - start
	if !gone {
		p.requests.of(snap, app).Done(code, took)
		if own {
			p.answers.count(code, &ctx.Response.Header)
		}
	}
	p.finish(ctx, e, took, own, gone)
}

// forwardEnd is how a forward left its request.
type forwardEnd uint8

const (
	endAnswered forwardEnd = iota // ctx.Response holds pollbal's own answer
	endRelayed                    // ctx.Response holds the backend's answer, read whole
	endStreamed                   // the backend's answer, whose streamed body records the request's duration
	endUpgraded                   // the backend switched protocols: an upgraded connection serves the rest
	endGone                       // the client went away before an answer: no request to count
)

// forwardSafely is forward with a panic contained to its request: the lease was already
// released by forward's deferred release while the panic unwound, the client gets a 500
// internal_error, and the process keeps serving. A panic after an upgrade was handed over
// leaves the connection, and its entry, to the upgrade.
func (p *Proxy) forwardSafely(ctx *fasthttp.RequestCtx, snap *balancer.Snapshot, app *balancer.App, e *logEntry) (end forwardEnd) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("panic while forwarding; answered 500", "app", app.Name, "panic", r)
			answerInternalError(ctx)
			end = endAnswered
			if ctx.Hijacked() {
				end = endUpgraded
			}
		}
	}()
	return p.forward(ctx, snap, app, e)
}

// relayResponse makes a backend's response header pollbal's answer: hop-by-hop headers go
// (and an X-Request-Id of the backend's), the backend and pool that answered are named, and
// the request's ID is set.
func relayResponse(h *fasthttp.ResponseHeader, backend, pool string, requestID []byte) {
	stripResponseHeaders(h)
	// Set, without its copy and check of our own names, which are valid and canonical.
	h.SetCanonical(viewBytes(headerBackend), viewBytes(backend))
	h.SetCanonical(viewBytes(headerPool), viewBytes(pool))
	setResponseID(h, requestID)
}
