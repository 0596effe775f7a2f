package proxy

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
)

// Handler serves one client request: route by Host, lease a backend, forward, report, release
// (a refused method, userinfo in the target or Host, or an ambiguous body framing is answered
// before any of that). It routes on one balancer snapshot and leases from it, retries
// included; a lease the queue hands over comes from the snapshot current then (Balancer.Wait),
// which the forward goes on with. Every request gets an X-Request-Id and an access-log entry
// (logentry.go), which the handler finishes when it answers, unless a streamed body or an
// upgraded connection takes it over. It never keeps ctx after returning.
func (p *Proxy) Handler(ctx *fasthttp.RequestCtx) {
	start := p.clock.now()
	p.handling.Add(1)
	defer p.handling.Add(-1)
	if c := trackedConn(ctx.Conn()); c != nil {
		c.handling()
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
			// A streamed body: its end records the duration (stream.go), and finishes e.
			if p.stopping.Load() {
				ctx.SetConnectionClose()
			}
			p.requests.of(snap, app).Count(ctx.Response.StatusCode())
			return
		case endUpgraded:
			// The upgraded connection has e; the request ends with its 101.
			p.requests.of(snap, app).Done(ctx.Response.StatusCode(), p.clock.now()-start)
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
	took := p.clock.now() - start
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
// released by attempt's deferred Release while the panic unwound, the client gets a 500
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

// forward sends the request to the app's best candidate and, when the backend could not be
// reached, to the next ones (up to proxy.retries more), then leaves the backend's response or
// pollbal's own answer in ctx.Response. e is the request's log entry: forward records its
// outcome, and attempt what each attempt leased; the request began at e.start (on p.clock),
// and so does its first attempt. A request body streamed to the backend is retried only when
// nothing was sent.
//
// The whole forward is bounded in time: no further candidate is tried once
// proxy.backend_timeout (plus proxy.queue_timeout, the longest first wait in the queue) has
// passed since start, and each attempt is bounded by backend_timeout, so the response begins,
// or pollbal answers, within queue_timeout + 2 × backend_timeout (and the watchdog's two
// ticks) whatever the number of retries. The request is then answered for the last failure.
//
// endStreamed reports a response whose body is streamed: the stream records the request's
// duration when its last byte has been written (pollbal_request_duration_seconds), so the
// caller only counts the request; the stream has e then, as an upgraded connection has after
// endUpgraded, and forward no longer touches it once attempt returned after a hand-over to an
// upgrade (startUpgrade), which may end at any time. endGone reports a client that went away while its request
// was queued or with a backend: it is counted in pollbal_client_gone_total, not as a request.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, snap *balancer.Snapshot, app *balancer.App, e *logEntry) forwardEnd {
	start := e.start
	pc := &snap.Config().Proxy
	up, o := p.planBody(ctx, pc)
	if o != outcomeOK {
		e.outcome = o
		return endAnswered
	}
	e.upload = up
	http10 := isHTTP10(&ctx.Request.Header) // prepareRequest makes the request HTTP/1.1
	upgrade, ok := prepareRequest(ctx, p.trust.get(snap.Config()))
	if !ok {
		answerBadHeaderName(ctx)
		return endAnswered
	}
	if upgrade == upgradeRefused {
		answerUpgradeUnsupported(ctx)
		return endAnswered
	}
	idem := idempotent(ctx.Request.Header.Method())

	var (
		tried  balancer.Tried
		failed outcome
		last   *balancer.Backend
		pool   string
		full   int
		queue  = true // a request queues at most once, and not after a failed forward
	)
	began := start
	deadline := start + pc.QueueTimeout + pc.BackendTimeout // no further candidate from then on
	retries := min(pc.Retries, configs.MaxRetries)          // validated; bounded here too, for Tried
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 || full > 0 {
			if began = p.clock.now(); began >= deadline {
				if last == nil {
					// Only refusals as full so far: as when no candidate is left.
					p.exhausted(app)
				}
				break
			}
		}
		o, b, lp := p.attempt(ctx, snap, app, e, &tried, began, pc.BackendTimeout, up, upgrade == upgradeWebSocket, &queue, last == nil)
		if ctx.Hijacked() {
			return endUpgraded // e is the upgraded connection's now
		}
		e.outcome = o
		switch o {
		case outcomeOK:
			b, streamed := ctx.Response.BodyStream().(*responseBody)
			if streamed {
				b.metrics, b.began = p.requests.of(snap, app), start
				e.handOver(ctx)
				b.entry = e // last: an HTTP/1.0 relay may end the stream from now on
			}
			if http10 && ctx.Response.IsBodyStream() && ctx.Response.Header.ContentLength() < 0 {
				p.relayUntilClose(ctx, pc.ClientTimeout)
			}
			if streamed {
				return endStreamed
			}
			return endRelayed
		case outcomeFull:
			// Nothing was processed: the next candidate at once, for any method, without
			// using a retry; a streamed body cannot be sent again.
			if full++; up == nil && full < maxFullRefusals {
				attempt--
				continue
			}
			if last == nil {
				p.exhausted(app)
				answerExhausted(ctx, app)
			} else {
				e.outcome = failed
				answerFailure(ctx, failed, app, last, pool)
			}
			return endAnswered
		case outcomeLeftQueue:
			p.answers.goneQueued.Inc()
			answerClientGone(ctx, nil)
			return endGone
		case outcomeClientGone:
			answerClientGone(ctx, up)
			if up == nil || up.clientErr == nil {
				p.answers.goneForwarding.Inc()
				return endGone
			}
			return endAnswered // its body could not be read: answered 400 or 408
		case outcomeQueueFull, outcomeQueueTimeout:
			answerQueued(ctx, app, o == outcomeQueueFull)
			return endAnswered
		case outcomeBodyTooLarge:
			answerBodyTooLarge(ctx, pc.MaxRequestBody)
			ctx.SetConnectionClose()
			return endAnswered
		}
		if o == outcomeNoCandidate {
			break
		}
		failed, last, pool = o, b, lp
		queue = false
		if !retryable(o, idem) || (up != nil && o != outcomeNotSent) {
			break
		}
	}
	if last == nil {
		e.outcome = outcomeNoCandidate
		answerExhausted(ctx, app)
		return endAnswered
	}
	e.outcome = failed
	answerFailure(ctx, failed, app, last, pool)
	return endAnswered
}

// maxFullRefusals bounds the candidates one request tries after refusals as full.
const maxFullRefusals = 8

// A request leases at most configs.MaxRetries + maxFullRefusals backends: up to 1 + retries
// that fail and up to maxFullRefusals that refuse it as full, whichever bound is reached first
// ending the forward. Each goes into the request's balancer.Tried so that no later pick goes
// back to it; this does not compile when they would not fit.
const _ uint = balancer.MaxTried - (configs.MaxRetries + maxFullRefusals)

// attempt leases one candidate not yet tried and forwards the request to it. The lease is
// released when attempt returns, whatever happened (a panic included), unless the response is
// streamed: then the stream releases it once fasthttp has written the response (stream.go), or
// the upgraded connection when it ends (upgrade.go).
//
// The forward runs without a deadline (a per-request deadline costs about 1 µs, see
// bench/TUNING.md): the watchdog closes a backend connection whose request outlasts
// timeout, and a forward that failed after lasting timeout is a timeout, not a failed
// connection.
//
// noneFailed says that no attempt of the request failed so far: this is its first, or every
// candidate tried refused it as full. When no candidate is left then (ErrNoCandidate: not a
// first try that queues behind waiters, ErrBehindWaiters), the request is handled as for an
// exhausted pool, pool_exhausted included, whether it then queues or is answered; a retry after
// a failure is answered for that failure instead.
//
// It records in the request's log entry e the backend it leased, how long the request queued,
// a refusal as full, and (roundTrip) when the answer's head came.
func (p *Proxy) attempt(ctx *fasthttp.RequestCtx, snap *balancer.Snapshot, app *balancer.App, e *logEntry, tried *balancer.Tried, began, timeout time.Duration, up *uploadBody, upgrade bool, queue *bool, noneFailed bool) (outcome, *balancer.Backend, string) {
	lease, err := p.bal.Acquire(snap, app, tried)
	if err != nil {
		if noneFailed && errors.Is(err, balancer.ErrNoCandidate) {
			p.exhausted(app)
		}
		if !*queue {
			return outcomeNoCandidate, nil, ""
		}
		*queue = false
		queued := p.clock.now()
		if lease, err = p.wait(ctx, snap, app); err != nil {
			o := queueOutcome(err)
			if o == outcomeQueueTimeout || o == outcomeLeftQueue { // it did wait
				e.rec.Queue = p.clock.now() - queued
			}
			return o, nil, ""
		}
		began = p.clock.now() // the backend timeout runs from the lease, not from the queue
		e.rec.Queue = began - queued
		snap = p.bal.Snapshot() // the lease may come from a newer snapshot than the request's (Balancer.Wait)
	}
	held := true
	defer func() {
		if held {
			lease.Release()
		}
	}()
	tried.Add(lease.Backend)
	e.tried(lease)
	e.began = began

	pool := p.upstreams.get(snap, lease.Backend)
	if len(ctx.Request.Host()) == 0 {
		// An HTTP/1.0 request may come without Host; the backend connection is HTTP/1.1,
		// which requires one.
		ctx.Request.SetHost(lease.Backend.Address)
	}
	streamed, err := p.roundTrip(ctx, pool, lease, e, up, upgrade)
	held = !streamed
	if p.afterDo != nil {
		p.afterDo() // tests only
	}
	if streamed && ctx.Hijacked() {
		// Upgraded: the session has the lease, the 101 and e (startUpgrade).
		p.bal.Report(balancer.Result{Outcome: balancer.Answered, App: app, Lease: lease, Code: fasthttp.StatusSwitchingProtocols})
		return outcomeOK, lease.Backend, lease.Pool
	}
	o := classify(err)
	if up != nil && err != nil {
		switch {
		case up.tooLarge:
			o = outcomeBodyTooLarge
		case up.clientErr != nil:
			o = outcomeClientGone
		}
	}
	if (o == outcomeConnFailed || o == outcomeBadResponse) && p.watch.timedOut(began, timeout) {
		o = outcomeTimeout
	}
	if o == outcomeOK && !streamed && refusedAsFull(&ctx.Response) {
		p.bal.Report(balancer.Result{Outcome: balancer.RefusedFull, App: app, Lease: lease})
		e.rec.Refusals++
		return outcomeFull, lease.Backend, lease.Pool
	}
	if o == outcomeOK {
		p.bal.Report(balancer.Result{Outcome: balancer.Answered, App: app, Lease: lease, Code: ctx.Response.StatusCode()})
		relayResponse(&ctx.Response.Header, lease.Backend.ID, lease.Pool, e.rec.RequestID)
		return o, lease.Backend, lease.Pool
	}
	if as, reason, ok := backendError(o, err); ok {
		// Counted, logged at warn (rate-limited per backend) and towards eject_after there.
		p.bal.Report(balancer.Result{Outcome: as, App: app, Lease: lease, Reason: reason, Err: err})
	} else {
		p.log.Debug("forward ended without an answer", "app", app.Name, "backend", lease.Backend.ID, "error", err)
	}
	return o, lease.Backend, lease.Pool
}

// exhausted reports that the request of app is handled as for an exhausted pool: counted in
// pollbal_pool_exhausted_total, and the alarm raised (deduplicated), by the balancer.
func (p *Proxy) exhausted(app *balancer.App) {
	p.bal.Report(balancer.Result{Outcome: balancer.Exhausted, App: app})
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
