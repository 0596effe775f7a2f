package poller

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/protocol"
)

// target is one backend being checked. A target has no goroutine of its own: a timer starts
// each check on a short-lived goroutine, so that 2,000 idle targets cost no stacks.
type target struct {
	Target
	metrics targetMetrics
	client  atomic.Pointer[client]

	// Guarded by Poller.mu.
	pending  bool        // counts towards the first round
	timer    *time.Timer // starts the next check; nil until scheduled
	gen      uint64      // of the timer allowed to start the next check
	inFlight bool
	started  time.Time // start of the last check
	// confirms: how many confirmations the Sink asked for (ConfirmAfter) since the last regular
	// check, the next (or running) check included; phase is the start of that regular check,
	// which the next regular check keeps.
	confirms int
	phase    time.Time

	// mu is held while a check's outcome is recorded and published; stopping takes it, so no
	// Result of a removed target is published once Update (or Run) has returned.
	mu      sync.Mutex
	stopped bool // written under both Poller.mu and mu; read under either

	// Owned by the check in flight (checks of a target never overlap); read and written under
	// Poller.mu only while no check is in flight.
	health   health
	last     Result
	lastGood []protocol.Report // last good answer, whatever health says
	lastLoad *protocol.Load    // its X-Pool-Load report, nil when it had none
	badLoad  bool              // the last good answer's X-Pool-Load was malformed (logged once per run of them)
	lastBody []byte            // its body
	backoff  *backoff.ExponentialBackOff
	failing  bool
	delay    time.Duration // from the start of the last check to the start of the next
}

func newTarget(tg Target, s configs.Poll, m targetMetrics, bufs *buffers, rt fasthttp.RoundTripper) *target {
	t := &target{
		Target:  tg,
		metrics: m,
		last:    Result{ID: tg.ID, Address: tg.Address, Reason: reasonNotChecked},
		delay:   s.Interval,
	}
	t.client.Store(newClient(tg.Address, s.MaxBody, bufs, rt))
	return t
}

// setMaxBody replaces the client when the body limit changed; a check in flight closes the old
// one's idle connections when it is done with it.
func (t *target) setMaxBody(maxBody int, bufs *buffers, rt fasthttp.RoundTripper) {
	if old := t.client.Load(); old.maxBody != maxBody {
		t.client.Store(newClient(t.Address, maxBody, bufs, rt))
		old.hc.CloseIdleConnections()
	}
}

// schedule arms t's next check after d, replacing any earlier timer; p.mu is held.
func (p *Poller) schedule(t *target, d time.Duration) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.gen++
	gen := t.gen
	t.timer = time.AfterFunc(d, func() { p.fire(t, gen) })
}

// stop stops t for good; p.mu is held. It waits for a Result being published for t.
func (p *Poller) stop(t *target) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	if !t.inFlight {
		t.client.Load().hc.CloseIdleConnections()
	}
}

// fire runs one check of t, then schedules the next one interval (or, while failing, the backoff
// delay) after this one started, so the spread phases hold. The Sink may ask for up to
// maxConfirms confirmation checks in a row after a regular check (Sink.ConfirmAfter), each
// sooner than the next regular check; that one keeps the phase.
func (p *Poller) fire(t *target, gen uint64) {
	p.mu.Lock()
	if gen != t.gen || t.stopped || t.inFlight || !p.running {
		p.mu.Unlock()
		return
	}
	t.inFlight = true
	t.started = time.Now()
	settings := p.settings
	regular, mayConfirm := t.confirms == 0, t.confirms < maxConfirms
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	c := t.client.Load()
	o, body := check(c, t.Address, p.userAgent, p.site, settings.Timeout, t.lastBody, t.lastGood)
	if c != t.client.Load() {
		c.hc.CloseIdleConnections()
	}

	t.mu.Lock()
	var confirm time.Duration
	if !t.stopped {
		t.lastBody = body
		p.record(t, settings, o)
		if mayConfirm && o.good() {
			confirm = p.sink.ConfirmAfter(t.last)
		}
	}
	t.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	t.inFlight = false
	if t.stopped {
		t.client.Load().hc.CloseIdleConnections()
		return
	}
	if p.settings != settings {
		t.resettle(p.settings) // an Update came while this check was in flight
	}
	p.firstCheckDoneLocked(t)
	if regular {
		t.phase = t.started
	}
	next := t.phase.Add(t.delay)
	if confirm > 0 && t.started.Add(confirm).Before(next) {
		t.confirms++
		next = t.started.Add(confirm)
	} else {
		t.confirms = 0
	}
	p.schedule(t, time.Until(next))
}

// maxConfirms bounds the confirmation checks in a row after a regular check.
const maxConfirms = 10

// record applies one check's outcome: health, result, backoff, metrics, logs, sink.
func (p *Poller) record(t *target, s configs.Poll, o outcome) {
	t.metrics.count(o.result)
	p.metrics.duration.Observe(o.duration.Seconds())

	t.health = t.health.next(o.good(), s.Rise, s.Fall)
	now := p.now()
	if o.good() {
		t.lastGood = o.reports
		t.recordLoad(o, now, p.log)
	}
	// Backoff applies only once the backend is not ready: while it is still ready under
	// fall > 1 it is checked at the normal interval, so fall × interval bounds how long a dead
	// backend keeps taking traffic.
	if o.good() || t.health.ready {
		t.failing = false
		t.delay = s.Interval
	} else {
		if !t.failing {
			t.failing = true
			if t.backoff == nil {
				t.backoff = newBackoff(s.Interval, s.MaxBackoff)
			}
			t.backoff.InitialInterval, t.backoff.MaxInterval = s.Interval, s.MaxBackoff
			t.backoff.Reset()
		}
		t.delay = t.backoff.NextBackOff()
	}
	prev := t.last
	t.last = nextResult(prev, t.health, o, t.lastGood, now)
	if t.last.Ready {
		t.last.Load = t.lastLoad
	}

	if msg, warn, ok := transition(prev, t.last); ok {
		attrs := []any{"backend", t.ID, "address", t.Address}
		if t.last.Reason != "" {
			attrs = append(attrs, "reason", t.last.Reason)
		}
		if warn {
			p.log.Warn(msg, attrs...)
		} else {
			p.log.Info(msg, attrs...)
		}
	}
	p.sink.Observe(t.last)
}

// resettle applies new settings to the wait before the next check; p.mu is held and no check
// of t is in flight.
func (t *target) resettle(s configs.Poll) {
	if !t.failing {
		t.delay = s.Interval
		return
	}
	t.backoff.InitialInterval, t.backoff.MaxInterval = s.Interval, s.MaxBackoff
	t.delay = min(max(t.delay, s.Interval), s.MaxBackoff)
}

// recordLoad keeps a good answer's load report with its arrival time. A malformed report is
// counted on every answer that carries one and logged once per run of them; it never makes the
// backend not ready, and the backend counts as reporting nothing meanwhile.
func (t *target) recordLoad(o outcome, at time.Time, log *slog.Logger) {
	t.lastLoad = nil
	if o.load != nil {
		l := *o.load
		l.At = at
		t.lastLoad = &l
	}
	if o.badLoad == "" {
		t.badLoad = false
		return
	}
	t.metrics.badLoad.Inc()
	if !t.badLoad {
		t.badLoad = true
		log.Warn("backend sent a malformed "+protocol.HeaderLoad+" header; ignored until it sends a valid one",
			"backend", t.ID, "address", t.Address, "value", o.badLoad)
	}
}
