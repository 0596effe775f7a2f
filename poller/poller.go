package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/defaults"
	"pollbal/internal/latch"
	"pollbal/protocol"
)

// Target is one backend to check. A plain value; it may be copied.
type Target struct{ ID, Address string }

// Result is the state of one target after a check. A plain value that may be copied, but Reports
// is shared with other Results of the same target while its answer does not change: treat it as
// read-only.
type Result struct {
	ID, Address string
	Ready       bool              // after rise/fall
	Reason      string            // "" when the last check was good; else why it failed (kept while still ready under fall>1)
	Reports     []protocol.Report // last good answer; nil when not ready
	Load        *protocol.Load    // the last good answer's X-Pool-Load report; nil when it had none or not ready
	Checked     time.Time         // when the last check finished
}

// Sink receives what the Poller finds, and is asked whether a target needs a confirmation
// check. Implementations must be safe for concurrent use, must not block for long (Observe and
// ConfirmAfter run on the goroutine of the check) and must not call Poller.Update (Update waits
// for a Result being published for a target it removes).
type Sink interface {
	Observe(Result)         // after every check of every target (called from many goroutines)
	RoundDone(at time.Time) // once per interval; first call only after every target's first check completed
	// ConfirmAfter is asked after a check of a target whose answer was good, right after
	// Observe: a positive duration, counted from the start of the check, that ends before the
	// next regular check asks for one more check of the target that soon; 0 asks for none. It
	// is asked after a regular check and after each confirmation, up to ten confirmations in a
	// row; the next regular check comes at its time, as if there had been none.
	ConfirmAfter(Result) time.Duration
}

// Options configure a Poller. Logger nil discards logs; Registerer nil registers no metrics.
type Options struct {
	Site, Version string // headers: User-Agent pollbal/<Version>, X-Pollbal-Site
	Settings      configs.Poll
	Targets       []Target
	Sink          Sink
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
	Now           func() time.Time // optional; default time.Now

	// transport answers every check in place of the network; nil is the real one. Tests set it
	// to run the poller's schedule on testing/synctest's fake clock, which sockets would stall.
	transport fasthttp.RoundTripper
}

// Poller checks every target once per interval. It is safe for concurrent use: Update
// may be called from any goroutine, before or while Run runs. It must not be copied.
type Poller struct {
	site, userAgent string
	sink            Sink
	log             *slog.Logger
	now             func() time.Time
	metrics         *metrics
	buffers         *buffers
	transport       fasthttp.RoundTripper // nil: the real one

	mu       sync.Mutex
	settings configs.Poll
	order    []*target          // current targets, in the order given
	targets  map[string]*target // current targets by ID
	reload   chan struct{}      // closed and replaced by every Update
	running  bool               // Run is running and its context has not ended
	ran      bool
	wg       sync.WaitGroup // checks in flight
	// Until the first round is done: targets whose first check has not completed.
	pending    int
	firstRound *latch.Latch // set when the first round is done
}

// New validates o and builds a Poller; nothing runs until Run.
func New(o Options) (*Poller, error) {
	var errs []error
	if o.Site == "" {
		errs = append(errs, errors.New("site is empty"))
	}
	if o.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if o.Sink == nil {
		errs = append(errs, errors.New("sink is nil"))
	}
	if err := validate(o.Settings, o.Targets); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new poller: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("new poller: %w", err)
	}
	p := &Poller{
		site:       o.Site,
		userAgent:  "pollbal/" + o.Version,
		sink:       o.Sink,
		log:        defaults.Logger(o.Logger),
		now:        o.Now,
		metrics:    m,
		buffers:    &buffers{},
		transport:  o.transport,
		targets:    map[string]*target{},
		reload:     make(chan struct{}),
		firstRound: latch.New(),
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.apply(o.Settings, o.Targets)
	return p, nil
}

// validate checks what New and Update are given; configs validates the same rules for users,
// this guards the poller's own invariants.
func validate(s configs.Poll, targets []Target) error {
	var errs []error
	if s.Interval <= 0 {
		errs = append(errs, fmt.Errorf("poll.interval %v: must be > 0", s.Interval))
	}
	if s.Timeout <= 0 || s.Timeout >= s.Interval {
		errs = append(errs, fmt.Errorf("poll.timeout %v: must be > 0 and < poll.interval", s.Timeout))
	}
	if s.Rise < 1 {
		errs = append(errs, fmt.Errorf("poll.rise %d: must be >= 1", s.Rise))
	}
	if s.Fall < 1 {
		errs = append(errs, fmt.Errorf("poll.fall %d: must be >= 1", s.Fall))
	}
	if s.MaxBackoff < s.Interval {
		errs = append(errs, fmt.Errorf("poll.max_backoff %v: must be >= poll.interval", s.MaxBackoff))
	}
	if s.MaxBody < 1 {
		errs = append(errs, fmt.Errorf("poll.max_body %d: must be >= 1", s.MaxBody))
	}
	seen := make(map[string]bool, len(targets))
	for i, t := range targets {
		switch {
		case t.ID == "":
			errs = append(errs, fmt.Errorf("targets[%d]: empty id", i))
		case seen[t.ID]:
			errs = append(errs, fmt.Errorf("targets[%d]: duplicate id %q", i, t.ID))
		}
		if t.Address == "" {
			errs = append(errs, fmt.Errorf("targets[%d]: empty address", i))
		}
		seen[t.ID] = true
	}
	return errors.Join(errs...)
}

// Run checks the targets until ctx ends, then stops every check and waits for the checks in
// flight. A check in flight when ctx ends is not interrupted (fasthttp cannot cancel one); it ends
// within poll.timeout and its result is dropped. Run may be called once; it returns nil when ctx
// ends.
func (p *Poller) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.ran {
		p.mu.Unlock()
		return errors.New("poller: run called twice")
	}
	p.ran, p.running = true, true
	n := len(p.order)
	for i, t := range p.order {
		p.schedule(t, offset(i, n, p.settings.Interval))
	}
	p.maybeFirstRoundLocked()
	p.mu.Unlock()

	p.rounds(ctx)

	p.mu.Lock()
	p.running = false
	for _, t := range p.order {
		p.stop(t)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// offset is when target i of n first starts: spread evenly across the interval.
func offset(i, n int, interval time.Duration) time.Duration {
	if n == 0 {
		return 0
	}
	return time.Duration(int64(interval) * int64(i) / int64(n))
}

// rounds calls Sink.RoundDone when the first round completes and then once per interval.
func (p *Poller) rounds(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-p.firstRound.Done():
	}
	p.sink.RoundDone(p.now())
	interval, reload := p.current()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			var next time.Duration
			next, reload = p.current()
			if next != interval {
				interval = next
				ticker.Reset(interval)
			}
		case <-ticker.C:
			p.sink.RoundDone(p.now())
		}
	}
}

func (p *Poller) current() (time.Duration, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings.Interval, p.reload
}

// Update applies a reload. Targets whose ID and Address are unchanged keep their state (rise/fall
// counters, last result, backoff, keep-alive connections; the connections are dropped only when
// poll.max_body changes); new targets start, spread across the interval from now; removed
// targets stop and their metrics are deleted. New settings apply from each target's next check.
// Update has no error to return: callers pass a validated config; anything else is logged and
// rejected whole, leaving the poller as it was.
func (p *Poller) Update(settings configs.Poll, targets []Target) {
	if err := validate(settings, targets); err != nil {
		p.log.Error("poller update rejected", "err", err)
		return
	}
	p.apply(settings, targets)
}

func (p *Poller) apply(settings configs.Poll, targets []Target) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, changed := p.targets, settings != p.settings
	p.settings = settings
	p.targets = make(map[string]*target, len(targets))
	p.order = make([]*target, 0, len(targets))
	for i, tg := range targets {
		t, ok := old[tg.ID]
		if ok && t.Address == tg.Address {
			delete(old, tg.ID)
			t.setMaxBody(settings.MaxBody, p.buffers, p.transport)
			if changed && p.running && !t.inFlight && !t.started.IsZero() {
				t.resettle(settings)
				t.confirms = 0 // the next check is a regular one, from the last one's start
				p.schedule(t, time.Until(t.started.Add(t.delay)))
			}
		} else {
			t = newTarget(tg, settings, p.metrics.forTarget(tg.ID), p.buffers, p.transport)
			if !p.firstRound.IsSet() {
				p.pending++
				t.pending = true
			}
			if p.running {
				p.schedule(t, offset(i, len(targets), settings.Interval))
			}
		}
		p.targets[tg.ID] = t
		p.order = append(p.order, t)
	}
	for id, t := range old {
		p.stop(t)
		if t.pending {
			t.pending = false
			p.pending--
		}
		if _, replaced := p.targets[id]; !replaced {
			p.metrics.forget(id)
		}
	}
	close(p.reload)
	p.reload = make(chan struct{})
	p.maybeFirstRoundLocked()
}

// maybeFirstRoundLocked sets firstRound once every target has been checked; p.mu is held.
// Before Run, nothing has been checked, so an empty poller waits for Run to be round-ready.
func (p *Poller) maybeFirstRoundLocked() {
	if p.ran && p.pending == 0 {
		p.firstRound.Set()
	}
}

// firstCheckDoneLocked records that t completed a check, for the first round; p.mu is held.
func (p *Poller) firstCheckDoneLocked(t *target) {
	if t.pending {
		t.pending = false
		p.pending--
		p.maybeFirstRoundLocked()
	}
}
