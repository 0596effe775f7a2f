package balancer

import (
	"errors"
	"time"
)

// Errors of Acquire.
var (
	// ErrNoCandidate means the app's pool (and default, where fallback is allowed) has no
	// available candidate.
	ErrNoCandidate = errors.New("no available candidate")
	// ErrBehindWaiters means requests are queued for a slot (proxy.queue_timeout) and the app's
	// pool or its fallback has a ready backend: a first try queues behind them (Wait) rather
	// than take a slot ahead of them. It is not an exhausted pool.
	ErrBehindWaiters = errors.New("requests are queued for a slot")
)

// MaxTried is how many backends one request can exclude: the candidates it tries, retries and
// moves past refusals as full together. The proxy sizes its attempts to fit (a compile-time
// check in proxy/forward.go) and the configuration bounds proxy.retries (configs.MaxRetries).
const MaxTried = 16

// Tried is the small, allocation-free set of backends a request has already tried.
type Tried struct {
	n  int
	bs [MaxTried]*Backend
}

// Add records b as tried; past MaxTried the oldest entries stay and b is not recorded.
func (t *Tried) Add(b *Backend) {
	if t.n < MaxTried {
		t.bs[t.n] = b
		t.n++
	}
}

func (t *Tried) has(b *Backend) bool {
	for i := 0; i < t.n; i++ {
		if t.bs[i] == b {
			return true
		}
	}
	return false
}

// Lease is one capacity slot held on a backend. Release it when the forward ends, whatever the
// outcome, after reporting what the forward learned (Balancer.Report). A Lease is a small
// value; copying it does not duplicate the slot. Release is idempotent on one Lease variable; a
// copy released as well (a bug) cannot take the address's in-flight count below 0, though while
// other leases are held it returns one of theirs early.
type Lease struct {
	Backend  *Backend
	Pool     string // the pool served from (the app's, or default after a fallback)
	Fallback bool
	snap     *Snapshot // the snapshot it was taken from: its proxy settings judge the forward's result
}

// Release returns the slot; later calls on l do nothing.
func (l *Lease) Release() {
	if b := l.Backend; b != nil {
		l.Backend = nil
		b.slot.release()
	}
}

// Acquire picks the best available candidate for app in snap, the request's snapshot, and takes
// a slot on it: the app's own pool first, then default where the app allows fallback, which it
// counts in pollbal_pool_fallback_total and tells the Observer. Backends in tried are skipped.
// When nothing is available it returns ErrNoCandidate and raises nothing: the caller reports
// Exhausted when it answers the request as for an exhausted pool.
//
// While requests are queued (queue.go), a first try (tried empty) that could queue (its pool or
// fallback has a ready backend) returns ErrBehindWaiters at once, so that the caller queues
// behind them rather than taking a slot ahead; one that cannot queue goes on.
func (b *Balancer) Acquire(snap *Snapshot, app *App, tried *Tried) (Lease, error) {
	if (tried == nil || tried.n == 0) && snap.cfg.Proxy.QueueTimeout > 0 && b.queues.waiting.Load() != 0 &&
		(hasReady(app.primary) || hasReady(app.fallback)) {
		return Lease{}, ErrBehindWaiters
	}
	return acquire(snap, app, tried, b.now, b.observer)
}

// acquire is Acquire without the queue: the queue's dispatch takes its waiters' leases with it.
// clock is read only under slow start.
func acquire(s *Snapshot, app *App, tried *Tried, clock func() time.Time, obs Observer) (Lease, error) {
	var now time.Time
	if s.slowStart > 0 {
		now = clock()
	}
	if b := s.take(app.primary, tried, now); b != nil {
		return Lease{Backend: b, Pool: app.Pool, snap: s}, nil
	}
	if app.fallback != nil {
		if b := s.take(app.fallback, tried, now); b != nil {
			app.counters.fallback.Inc()
			obs.FellBack(app.Pool, app.Name, app.Service)
			return Lease{Backend: b, Pool: app.fallback.pool, Fallback: true, snap: s}, nil
		}
	}
	return Lease{}, ErrNoCandidate
}

// take selects and leases one member of l; nil when none is available. When a take loses a race
// the selection runs again, so the next best candidate is tried.
func (s *Snapshot) take(l *candList, tried *Tried, now time.Time) *Backend {
	set := l.current()
	for gi := range set.groups {
		for attempt := 0; attempt <= len(set.groups[gi].members); attempt++ {
			m, limit := s.pick(l, set, gi, tried, now)
			if m == nil {
				break
			}
			if s.takeSlot(m, limit, now) {
				return m.b
			}
		}
	}
	return nil
}

// takeSlot takes a slot on m, which a pick chose under limit. The check-and-take compares against
// limit, read by the pick, and a reload or a fleet report may have lowered m's limit since: so
// the current limit is read again after the take, and a take that put the count past it is
// given back (released, which raises the hints and wakes the queue like any release). Go's
// atomics are sequentially consistent: a take whose re-read still saw the old limit came
// before the lowering's store, so once a lowering is published every lease taken afterwards
// is within it (see "Ranking and leases" in docs/concepts.md).
func (s *Snapshot) takeSlot(m *member, limit int64, now time.Time) bool {
	n := m.slot.tryAcquire(limit)
	if n == 0 {
		return false
	}
	cur := m.b.limit.Load()
	if s.slowStart > 0 {
		cur = s.ramped(m, m.b.health.Load(), now)
	}
	if n <= cur {
		return true
	}
	// Undo the take, and only the take: n-1 >= cur still fills the backend, so no waiter could
	// use the slot, and waking the queue here would deadlock the queue's own dispatch, which
	// takes slots for waiters while it holds the queue's lock.
	m.slot.inFlight.Add(-1)
	return false
}

// pick ranks the members of set's group gi by spare capacity with the configured tie-break and
// returns the best available member and its current limit: the first member, in rotation
// order, with the most spare. It stops early at a member whose spare capacity equals the
// largest capacity in the set, since no other member can have more, and skips a block of
// members whose spare hint is no more than the best spare found so far, since none of them
// could replace it. Without slow start (limits only change through leases then) it tightens
// the hint of each whole block it scans.
func (s *Snapshot) pick(l *candList, set *candSet, gi int, tried *Tried, now time.Time) (*member, int64) {
	g := &set.groups[gi]
	ms := g.members
	n := len(ms)
	if n == 0 {
		return nil, 0
	}
	start := 0
	if !s.tieID && n > 1 {
		start = int(l.rot.n.Add(1) % uint32(n))
	}
	hinted := s.slowStart <= 0 && !set.stale.Load()
	var best *member
	var bestSpare, bestLimit int64
	// Visit [start, n) then [0, start) block by block; the block holding start comes in two
	// parts. Block k is ms[starts[k]:starts[k+1]], empty where the group has none of the
	// pool's members of that block.
	nb := len(g.hints)
	k := ms[start].pos / hintBlock
	for p, left := start, n; left > 0; {
		lo, hi := int(g.starts[k]), int(g.starts[k+1])
		end := min(hi, p+left)
		if end > p {
			left -= end - p
			var seen int64
			if hinted {
				seen = g.hints[k].bound.Load()
			}
			if !hinted || seen > bestSpare {
				m, spare, limit, top := s.scanBlock(ms[p:end], tried, now, bestSpare, set.maxCap)
				if m != nil {
					best, bestSpare, bestLimit = m, spare, limit
					if spare >= set.maxCap {
						return best, bestLimit
					}
				}
				if hinted && p == lo && end == hi {
					g.hints[k].tighten(seen, top, l, gi, k)
				}
			}
		}
		if k++; k == nb {
			k = 0
		}
		p = int(g.starts[k])
	}
	return best, bestLimit
}

// scanBlock is pick's scan of ms, one block or part of one: the first member with the most
// spare above bestSpare (nil when none has more), its spare and its limit, and the largest
// capacity - in-flight among ms whatever each member's availability. It stops at a member whose
// spare reaches maxCap. A function of its own, so that the loop over the members keeps its
// values in registers.
func (s *Snapshot) scanBlock(ms []*member, tried *Tried, now time.Time, bestSpare, maxCap int64) (best *member, spare, limit, top int64) {
	for _, m := range ms {
		inFlight := m.slot.inFlight.Load()
		if raw := m.capacity - inFlight; raw > top {
			top = raw
		}
		h, ok := candidate(m, tried)
		if !ok {
			continue
		}
		lim := s.limit(m, h, now)
		sp := lim - inFlight
		if sp <= 0 || sp <= bestSpare {
			continue
		}
		best, bestSpare, spare, limit = m, sp, sp, lim
		if sp >= maxCap {
			return best, spare, limit, top
		}
	}
	return best, spare, limit, top
}

// candidate is the one predicate for "is m a candidate now", apart from its free slot: ready
// (re-checked against the live health, which may be newer than the candidate set), not ejected,
// not already tried. It returns the health it checked, for limit. The scheduler and the quiet
// read path both use it (through available outside the pick's loop).
func candidate(m *member, tried *Tried) (*Health, bool) {
	h := m.b.health.Load()
	if !h.Ready || m.b.ejected.Load() || (tried != nil && tried.has(m.b)) {
		return nil, false
	}
	return h, true
}

// available is candidate with the member's current capacity limit (slow start applied).
func (s *Snapshot) available(m *member, tried *Tried, now time.Time) (int64, bool) {
	h, ok := candidate(m, tried)
	if !ok {
		return 0, false
	}
	return s.limit(m, h, now), true
}

// limit is this instance's limit on the member (fleet.go: the whole capacity for a lone
// instance), ramped from 10% to 100% over slow_start after it became ready (h is its health).
// Without slow start it is inlined and costs the pick one atomic load.
func (s *Snapshot) limit(m *member, h *Health, now time.Time) int64 {
	if s.slowStart <= 0 {
		return m.b.limit.Load()
	}
	return s.ramped(m, h, now)
}

// ramped is limit with slow start on.
func (s *Snapshot) ramped(m *member, h *Health, now time.Time) int64 {
	l := m.b.limit.Load()
	if h.ReadySince.IsZero() {
		return l
	}
	return rampLimit(l, now.Sub(h.ReadySince), s.slowStart)
}

// rampLimit is limit ramped from 10% to 100% over slowStart, elapsed after the backend became
// ready: at least 1 while limit is, 0 when limit is 0. It is a pure function.
func rampLimit(limit int64, elapsed, slowStart time.Duration) int64 {
	if limit <= 0 || slowStart <= 0 || elapsed >= slowStart {
		return max(limit, 0)
	}
	elapsed = max(elapsed, 0)
	frac := 0.1 + 0.9*float64(elapsed)/float64(slowStart)
	return max(int64(float64(limit)*frac), 1)
}

// candidates counts the available members of l with a free slot, without taking anything.
func (s *Snapshot) candidates(l *candList, now time.Time) int {
	if l == nil {
		return 0
	}
	n := 0
	set := l.current()
	for gi := range set.groups {
		for _, m := range set.groups[gi].members {
			if limit, ok := s.available(m, nil, now); ok && m.slot.inFlight.Load() < limit {
				n++
			}
		}
	}
	return n
}
