package proxy

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/proxy/upstream"
)

// A forward takes a request from its route to an answer, as a small state machine: each step
// (a try on a candidate, a wait in the queue) ends in an outcome, and the pure function next
// decides from the outcome and the forward's state what comes next. The loop in forward only
// applies what next decides:
//
//	step        does                                             ends in
//	try, retry  leases the best candidate not tried yet, sends   an outcome of the round trip, or no candidate
//	queue       waits in the pool's queue once, then sends       the same, or how the wait ended
//	relay       passes the backend's answer on                   (the forward's end)
//	upgraded    leaves the connection to the upgraded session    (the forward's end)
//	exhausted…  makes pollbal's own answer                       (the forward's end)
//
// A try after a refusal as full uses no retry; a retry after a failure uses one of
// proxy.retries. The request's access-log entry is filled at fixed points: each lease when it is
// taken (send), the queue's wait (queue), and the forward's last outcome at its end (relay,
// answer).

// step is what a forward does next.
type step uint8

const (
	stepTry          step = iota // lease a candidate not tried yet and send: a refusal as full led here, or nothing yet
	stepRetry                    // the same after a failure: it used one of proxy.retries
	stepQueue                    // wait in the pool's queue for a slot, then send
	stepRelay                    // the backend's answer is in ctx.Response: pass it on
	stepUpgraded                 // the backend switched protocols: the upgraded connection has the rest
	stepExhausted                // answer 503 pool_exhausted
	stepFailed                   // answer for the last failure: 502 backend_unreachable or bad_response, 504
	stepQueueFull                // answer 503 queue_full
	stepQueueTimeout             // answer 503 queue_timeout
	stepLeftQueue                // the client left the queue: no answer
	stepClientGone               // the client went away, or failed while sending its body
	stepTooLarge                 // answer 413: the streamed body grew over proxy.max_request_body
)

// action is next's decision: the step, and whether the request's pool is to be reported
// exhausted now (pool_exhausted: at most once per request).
type action struct {
	step      step
	exhausted bool
}

// maxFullRefusals bounds the candidates one request tries after refusals as full.
const maxFullRefusals = 8

// A request leases at most configs.MaxRetries + maxFullRefusals backends: up to 1 + retries
// that fail and up to maxFullRefusals that refuse it as full, whichever bound is reached first
// ending the forward. Each goes into the request's balancer.Tried so that no later pick goes
// back to it; this does not compile when they would not fit.
const _ uint = balancer.MaxTried - (configs.MaxRetries + maxFullRefusals)

// forwardState is what next decides from, as plain values: the request's own (fixed) and what
// its steps found so far.
type forwardState struct {
	idempotent bool    // the method may be sent twice: retried after a failed connection
	streamed   bool    // the request body is streamed: once sent it cannot be sent again
	retries    int     // proxy.retries: failures that may be followed by another try
	failures   int     // tries that failed
	refusals   int     // tries refused as full
	queued     bool    // the request has waited in the queue: it never waits again
	exhausted  bool    // the pool has been reported exhausted
	last       outcome // the last failure; outcomeOK while none
}

// next decides what a forward does after a step ended in o. late says that
// proxy.backend_timeout (plus proxy.queue_timeout) has passed since the request began: no
// further try starts then.
//
// A backend's answer is relayed. A refusal as full tries the next candidate at once, for any
// method (nothing was processed), without using a retry, up to maxFullRefusals and unless the
// body was streamed. A failure is retried while retryable says so, the body could be sent again
// and retries are left. A request that finds no candidate waits in the queue once, unless a try
// has failed; one that finds none again, or cannot queue, is answered for its last failure, or
// as for an exhausted pool when none failed. Finding no candidate while nothing failed makes
// the pool exhausted, and so does an answer as for one (a first try that only queues behind
// other waiters does not); it is reported once per request.
func next(s forwardState, o outcome, late bool) (forwardState, action) {
	switch o {
	case outcomeOK:
		return s, action{step: stepRelay}
	case outcomeUpgraded:
		return s, action{step: stepUpgraded}
	case outcomeFull:
		s.refusals++
		if !s.streamed && s.refusals < maxFullRefusals && !late {
			return s, action{step: stepTry}
		}
		return s.giveUp()
	case outcomeNotSent, outcomeConnFailed, outcomeTimeout, outcomeBadResponse:
		s.failures++
		s.last = o
		sendable := !s.streamed || o == outcomeNotSent
		if retryable(o, s.idempotent) && sendable && s.failures <= s.retries && !late {
			return s, action{step: stepRetry}
		}
		return s, action{step: stepFailed}
	case outcomeNoCandidate, outcomeBehindWaiters:
		switch {
		case s.last != outcomeOK:
			return s, action{step: stepFailed}
		case s.queued:
			return s.giveUp()
		}
		s.queued = true
		exhausted := o == outcomeNoCandidate && !s.exhausted
		s.exhausted = s.exhausted || exhausted
		return s, action{step: stepQueue, exhausted: exhausted}
	case outcomeQueueFull:
		return s, action{step: stepQueueFull}
	case outcomeQueueTimeout:
		return s, action{step: stepQueueTimeout}
	case outcomeLeftQueue:
		return s, action{step: stepLeftQueue}
	case outcomeClientGone:
		return s, action{step: stepClientGone}
	case outcomeBodyTooLarge:
		return s, action{step: stepTooLarge}
	}
	return s.giveUp()
}

// giveUp ends a forward that has no candidate left to try: answered for its last failure, or
// as for an exhausted pool when none failed.
func (s forwardState) giveUp() (forwardState, action) {
	if s.last != outcomeOK {
		return s, action{step: stepFailed}
	}
	exhausted := !s.exhausted
	s.exhausted = true
	return s, action{step: stepExhausted, exhausted: exhausted}
}

// forwarding is one request's forward in progress: the request, what next decides from, and
// the lease of the try under way. It lives on the handler's stack.
type forwarding struct {
	p       *Proxy
	ctx     *fasthttp.RequestCtx
	snap    *balancer.Snapshot // the request's: every try leases from it
	app     *balancer.App
	e       *logEntry
	pc      *configs.Proxy
	up      *uploadBody // the request body when it is streamed; nil when buffered
	upgrade bool        // a WebSocket handshake: a 101 hands the connection over

	state    forwardState
	tried    balancer.Tried
	held     hold          // the lease of the try under way
	began    time.Duration // when the try under way began, on p.clock
	deadline time.Duration // no try begins from then on
	// lastBackend and lastPool are where the last failure happened, for its answer.
	lastBackend *balancer.Backend
	lastPool    string
}

// hold is the lease of a try, owned by the forward until it is released (the try ended) or
// handed over to what outlives the handler: a streamed body or an upgraded connection. Both
// leave it empty, so that releasing it again (the forward's deferred release, a panic
// included) does nothing.
type hold struct{ lease balancer.Lease }

// handOver gives the lease away: the caller's new owner releases it.
func (h *hold) handOver() balancer.Lease {
	l := h.lease
	h.lease = balancer.Lease{}
	return l
}

// release returns the lease's slot, if one is held.
func (h *hold) release() { h.lease.Release() }

// forward sends the request to the app's best candidate and on as next decides, then leaves
// the backend's response or pollbal's own answer in ctx.Response. e is the request's log
// entry; the request began at e.start (on p.clock), and so does its first try. A request body
// streamed to the backend is retried only when nothing was sent.
//
// The whole forward is bounded in time: no further try starts once proxy.backend_timeout (plus
// proxy.queue_timeout, the longest first wait in the queue) has passed since start, and each
// try is bounded by backend_timeout, so the response begins, or pollbal answers, within
// queue_timeout + 2 × backend_timeout whatever the number of retries.
//
// endStreamed reports a response whose body is streamed: the stream has the lease and e, and
// records the request's duration when its last byte has been written
// (pollbal_request_duration_seconds), so the caller only counts the request. After endUpgraded
// the upgraded connection has them, and may end at any time. endGone reports a client that
// went away while its request was queued or with a backend: it is counted in
// pollbal_client_gone_total, not as a request.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, snap *balancer.Snapshot, app *balancer.App, e *logEntry) forwardEnd {
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
	f := forwarding{
		p: p, ctx: ctx, snap: snap, app: app, e: e, pc: pc, up: up,
		upgrade: upgrade == upgradeWebSocket,
		state: forwardState{
			idempotent: idempotent(ctx.Request.Header.Method()),
			streamed:   up != nil,
			retries:    min(pc.Retries, configs.MaxRetries), // validated; bounded here too, for Tried
		},
		began:    e.start,
		deadline: e.start + pc.QueueTimeout + pc.BackendTimeout,
	}
	defer f.held.release() // a panic included
	act := action{step: stepTry}
	for {
		switch act.step {
		case stepTry, stepRetry:
			o = f.try()
		case stepQueue:
			o = f.queue()
		case stepRelay:
			return f.relay(http10)
		case stepUpgraded:
			return endUpgraded // e is the upgraded connection's now
		default:
			return f.answer(act.step)
		}
		late := false
		if o != outcomeOK && o != outcomeUpgraded {
			f.began = p.clock.Now() // a try that follows begins now
			late = f.began >= f.deadline
		}
		f.state, act = next(f.state, o, late)
		if act.exhausted {
			// The one place the proxy reports an exhausted pool: counted in
			// pollbal_pool_exhausted_total and the alarm raised (deduplicated) by the balancer.
			p.bal.Report(balancer.Result{Outcome: balancer.Exhausted, App: app})
		}
	}
}

// try leases the best candidate not tried yet from the request's snapshot and sends the
// request to it.
func (f *forwarding) try() outcome {
	lease, err := f.p.bal.Acquire(f.snap, f.app, &f.tried)
	switch {
	case err == nil:
		return f.send(lease, f.snap)
	case errors.Is(err, balancer.ErrBehindWaiters):
		return outcomeBehindWaiters
	}
	return outcomeNoCandidate
}

// queue waits in the pool's queue (proxy.queue_timeout; balancer/queue.go) and sends the
// request with the lease it is handed, which may come from a newer snapshot than the
// request's. The backend timeout runs from the lease, not from the queue. The entry gets the
// time waited.
func (f *forwarding) queue() outcome {
	p := f.p
	queued := p.clock.Now()
	lease, err := p.wait(f.ctx, f.snap, f.app)
	if err != nil {
		o := queueOutcome(err)
		if o == outcomeQueueTimeout || o == outcomeLeftQueue { // it did wait
			f.e.rec.Queue = p.clock.Now() - queued
		}
		return o
	}
	f.began = p.clock.Now()
	f.e.rec.Queue = f.began - queued
	return f.send(lease, p.bal.Snapshot()) // the snapshot the lease may come from (Balancer.Wait)
}

// send forwards the request on lease, taken from snap. It reports what the backend did and
// releases the lease, unless the backend's answer is streamed (relay hands the lease to the
// stream) or it switched protocols (the upgraded connection has it). The entry gets the
// backend, and (RoundTrip) when the answer's head came.
//
// The round trip runs without a deadline of its own: the watchdog closes a backend connection
// whose request outlasts proxy.backend_timeout, and a try that failed after lasting the timeout
// is a timeout, not a failed connection.
func (f *forwarding) send(lease balancer.Lease, snap *balancer.Snapshot) outcome {
	p, ctx, e, app := f.p, f.ctx, f.e, f.app
	f.held = hold{lease: lease}
	f.tried.Add(lease.Backend)
	e.tried(lease)
	e.began = f.began
	pool := p.upstreams.Get(snap, lease.Backend)
	if len(ctx.Request.Host()) == 0 {
		// An HTTP/1.0 request may come without Host; the backend connection is HTTP/1.1,
		// which requires one.
		ctx.Request.SetHost(lease.Backend.Address)
	}
	var up upstream.Upload // nil, not a nil *uploadBody, when the body is buffered
	if f.up != nil {
		up = f.up
	}
	res, err := pool.RoundTrip(ctx, up, f.upgrade, e.on)
	if res.Head > 0 {
		e.rec.Upstream = res.Head - e.began
	}
	if res.Kind == upstream.TripSwitched {
		p.bal.Report(balancer.Result{Outcome: balancer.Answered, App: app, Lease: lease, Code: fasthttp.StatusSwitchingProtocols})
		p.startUpgrade(ctx, res.Conn, f.held.handOver(), e)
	}
	if p.afterDo != nil {
		p.afterDo() // tests only
	}
	switch res.Kind {
	case upstream.TripSwitched:
		return outcomeUpgraded
	case upstream.TripRefused:
		p.bal.Report(balancer.Result{Outcome: balancer.RefusedFull, App: app, Lease: lease})
		e.rec.Refusals++
		f.held.release()
		return outcomeFull
	case upstream.TripWhole, upstream.TripStreamed:
		p.bal.Report(balancer.Result{Outcome: balancer.Answered, App: app, Lease: lease, Code: ctx.Response.StatusCode()})
		relayResponse(&ctx.Response.Header, lease.Backend.ID, lease.Pool, e.rec.RequestID)
		if res.Kind == upstream.TripWhole {
			f.held.release()
		}
		return outcomeOK
	}
	o := classify(err)
	if up := f.up; up != nil {
		switch {
		case up.tooLarge:
			o = outcomeBodyTooLarge
		case up.clientErr != nil:
			o = outcomeClientGone
		}
	}
	if (o == outcomeConnFailed || o == outcomeBadResponse) && p.watch.TimedOut(f.began, f.pc.BackendTimeout) {
		o = outcomeTimeout
	}
	if as, reason, ok := backendError(o, err); ok {
		// Counted, logged at warn (rate-limited per backend) and towards eject_after there.
		p.bal.Report(balancer.Result{Outcome: as, App: app, Lease: lease, Reason: reason, Err: err})
		f.lastBackend, f.lastPool = lease.Backend, lease.Pool
	} else {
		p.log.Debug("forward ended without an answer", "app", app.Name, "backend", lease.Backend.ID, "error", err)
	}
	f.held.release()
	return o
}

// relay ends a forward with the backend's answer. A streamed body takes the lease, and the
// entry with it, which it finishes when its last byte has been written; an HTTP/1.0 client gets
// a body of unknown length relayed until the connection closes.
func (f *forwarding) relay(http10 bool) forwardEnd {
	p, ctx, e := f.p, f.ctx, f.e
	e.outcome = outcomeOK
	b, streamed := ctx.Response.BodyStream().(*upstream.ResponseBody)
	if streamed {
		e.handOver(ctx, f.held.handOver(), p.requests.of(f.snap, f.app))
		b.SetOwner(e) // last: an HTTP/1.0 relay may end the stream from now on
	}
	if http10 && streamed && ctx.Response.Header.ContentLength() < 0 {
		p.relayUntilClose(ctx, e, f.pc.ClientTimeout)
	}
	if streamed {
		return endStreamed
	}
	return endRelayed
}

// answer ends a forward with pollbal's own answer for step s, and records the forward's last
// outcome in the entry.
func (f *forwarding) answer(s step) forwardEnd {
	p, ctx, e := f.p, f.ctx, f.e
	switch s {
	case stepExhausted:
		e.outcome = outcomeNoCandidate
		answerExhausted(ctx, f.app)
	case stepFailed:
		e.outcome = f.state.last
		answerFailure(ctx, f.state.last, f.app, f.lastBackend, f.lastPool)
	case stepQueueFull, stepQueueTimeout:
		full := s == stepQueueFull
		e.outcome = outcomeQueueTimeout
		if full {
			e.outcome = outcomeQueueFull
		}
		answerQueued(ctx, f.app, full)
	case stepLeftQueue:
		e.outcome = outcomeLeftQueue
		p.answers.goneQueued.Inc()
		answerClientGone(ctx, nil)
		return endGone
	case stepClientGone:
		e.outcome = outcomeClientGone
		answerClientGone(ctx, f.up)
		if f.up == nil || f.up.clientErr == nil {
			p.answers.goneForwarding.Inc()
			return endGone
		}
		// Its body could not be read: answered 400 or 408.
	case stepTooLarge:
		e.outcome = outcomeBodyTooLarge
		answerBodyTooLarge(ctx, f.pc.MaxRequestBody)
		ctx.SetConnectionClose()
	}
	return endAnswered
}
