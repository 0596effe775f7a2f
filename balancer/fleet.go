package balancer

import (
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// reportMaxAge is how many poll intervals a load report stays fresh: an older one counts as no
// report.
const reportMaxAge = 3

// Load is a backend's last load report as this instance keeps it: what its last good /pool
// answer said about its own load (X-Pool-Load) and when the answer arrived, stamped with how
// many requests this instance had in flight on the backend at that moment. A Load value is
// immutable once published.
type Load struct {
	protocol.Load
	MineThen int64 // this instance's in-flight on the backend when the answer arrived
	// LimitThen is this instance's limit on the backend when the answer arrived, before the
	// answer changed it: a paced rise keeps at least it (fleetLimit), and a paced limit above
	// it is still rising (ConfirmAfter).
	LimitThen int64
	// The report before this one: what it said the others had in progress, and when it
	// arrived (zero when there was none).
	PrevOthers int64
	PrevAt     time.Time
}

// others is what the report says the other instances (and clients) had in progress.
func (l *Load) others() int64 { return max(0, l.InFlight-l.MineThen) }

// fleetInput is everything the per-instance limit of one backend depends on.
type fleetInput struct {
	Configured int64         // the backend's capacity in the configuration
	Instances  int           // fleet.instances
	Report     *Load         // the last good answer's report; nil when it carried none
	Now        time.Time     // the time the limit is computed for
	Interval   time.Duration // poll.interval: a report older than reportMaxAge intervals is dropped
}

// fleetDecision is the outcome of fleetLimit.
type fleetDecision struct {
	Capacity int64 // the backend's total capacity: the reported one when a fresh report has one
	Limit    int64 // what this instance may have in flight on it (before slow start)
	Fresh    bool  // the limit was computed from a report
	Paced    bool  // the limit is below what the others leave free: it rises on the next report
}

// fleetLimit computes how many requests this instance may have in flight on a backend. It is a
// pure function. With a fresh report the limit is the backend's capacity minus what the other
// instances had in progress when it answered, max(0, capacity - max(0, reported - mine_then));
// without one, an equal share, ceil(capacity / instances).
//
// One rule is added to that, for fleets (instances > 1): when the report shows the backend full
// and this instance holding more than an equal share and more than all the others together, its
// limit is one below what it held (it gives one slot back until its next report). Without it,
// an instance that took the whole backend while the others were idle would keep it: a newcomer's
// limit is capacity - (what the busy one holds) = 0, the busy one's stays the capacity, and
// nothing would ever change while the busy one keeps the backend full. With it, the slot it
// leaves free shows in the newcomer's next report, the newcomer takes it, and the busy one's
// next report counts the newcomer's requests; it goes on one slot per interval until no
// instance holds more than the others together (or more than an equal share).
//
// A second rule makes the limit rise only on two reports: others is the larger of what this
// report and the one before it (while fresh) say. A backend counts only the requests it is
// processing; a request whose response is on its way back, or whose client's next request is
// on its way in, is not counted, yet its instance takes the slot again at once. A report taken
// at such a moment shows a slot free that is not, and every instance that believed it was
// refused (bench/TUNING.md, "Fleet pacing", has how often). Such a dip lasts milliseconds; a
// slot really freed stays free. So a report that would raise the limit is confirmed by a second
// check confirmAfter later (ConfirmAfter, which the poller asks after each good check), and the
// limit rises then; a second that shows even less asks for a third, since the first may have
// over-counted (one of this instance's requests had just ended when the answer arrived). A
// falling limit applies at once.
//
// A third rule paces a rise: the limit is at most mine_then + ceil(free / instances), where
// free = capacity - others - mine_then is what the backend had free when it answered. A
// backend that looks idle to every instance at once (the processes in front of it did not run
// for a while, so both checks saw it empty) would otherwise be claimed whole by each of them:
// 3 instances x 8 slots on 8 slots, and 16 refusals. Paced, the instances that claim at once
// take no more than free + instances - 1 together. An instance alone on a backend reaches
// capacity - others in a few steps, one per check (the gap shrinks by a factor
// (instances-1)/instances per step); those checks are asked for at once while the limit is
// below capacity - others and the instance uses it (ConfirmAfter), so it does so well within
// one interval. A paced limit never falls below the limit this instance already had from the
// previous fresh report (LimitThen) while capacity - others is not below that (when it is,
// the limit falls at once, paced as before): a busy instance's clients are between two
// requests at some checks, mine_then is below its limit then, and mine_then +
// ceil(free / instances) alone would take back part of a rise already made, and the rise
// would wait for the next regular check. Instances that claim at once still rise together by
// no more than free + instances - 1 above what they had.
func fleetLimit(in fleetInput) fleetDecision {
	capacity := max(in.Configured, 0)
	n := int64(max(in.Instances, 1))
	r := in.Report
	if r == nil || reportStale(r.At, in.Now, in.Interval) {
		return fleetDecision{Capacity: capacity, Limit: (capacity + n - 1) / n}
	}
	if r.Capacity > 0 {
		capacity = r.Capacity
	}
	others := r.others()
	held := max(others, r.prevOthers(in.Now, in.Interval))
	limit := capacity - held
	if n > 1 && r.InFlight >= capacity && r.MineThen > (capacity+n-1)/n && others < r.MineThen {
		// Full, and this instance holds more than its share: one slot back (see above).
		limit = min(limit, r.MineThen-1)
	}
	paced := false
	if n > 1 {
		// A rise by at most this instance's share of what was free, never below the limit the
		// previous fresh report gave (see above).
		free := max(0, capacity-held-r.MineThen)
		step := r.MineThen + (free+n-1)/n
		if limit >= r.LimitThen && !r.PrevAt.IsZero() && !reportStale(r.PrevAt, in.Now, in.Interval) {
			step = max(step, r.LimitThen)
		}
		if step < limit {
			limit, paced = step, true
		}
	}
	return fleetDecision{Capacity: capacity, Limit: max(0, limit), Fresh: true, Paced: paced}
}

// prevOthers is the others of the report before r while that one is fresh at now; 0 without.
func (r *Load) prevOthers(now time.Time, interval time.Duration) int64 {
	if r.PrevAt.IsZero() || reportStale(r.PrevAt, now, interval) {
		return 0
	}
	return r.PrevOthers
}

// confirmAfter is how soon after a report that would raise a limit the backend is checked again
// to confirm it (at most a quarter of the interval): long enough for the requests that were
// between two of their client's requests when the backend counted (a response on its way back,
// the client's next request on its way in) to be counted again.
const confirmAfter = 25 * time.Millisecond

// confirmDelay is how soon a report that would raise a limit is confirmed, for interval.
func confirmDelay(interval time.Duration) time.Duration { return min(confirmAfter, interval/4) }

// ConfirmAfter says how soon backend id should be checked again; 0 when there is nothing to
// confirm. When its last report shows the others with fewer requests in progress than the
// report before it, the limit does not rise until a second report shows it too (fleetLimit),
// and that report is asked for now rather than an interval later. Likewise while a paced limit
// is below what the others leave free and either rose on this report or this instance used at
// least half of the limit it had when the answer arrived: a busy instance alone on a backend
// then reaches its spare capacity in a few checks rather than a few intervals, even when its
// clients were between two requests at some of them, while an idle one asks for none. The
// poller bounds how many such checks come in a row.
func (b *Balancer) ConfirmAfter(id string) time.Duration {
	s := b.snap.Load()
	m := s.byID[id]
	if m == nil {
		return 0
	}
	l := m.b.load.Load()
	if l == nil {
		return 0
	}
	now := b.now()
	if l.prevOthers(now, s.cfg.Poll.Interval) > l.others() {
		return confirmDelay(s.cfg.Poll.Interval)
	}
	if d := s.decide(m.cfg, l, now); d.Fresh && d.Paced && (d.Limit > l.LimitThen || 2*l.MineThen >= l.LimitThen) {
		return confirmDelay(s.cfg.Poll.Interval)
	}
	return 0
}

// reportStale reports whether a report that arrived at `at` is older than reportMaxAge
// intervals at now. A report from the future (a clock step) is fresh.
func reportStale(at, now time.Time, interval time.Duration) bool {
	return now.Sub(at) > reportMaxAge*interval
}

// decide computes backend cb's decision in snapshot s from its load report l at now.
func (s *Snapshot) decide(cb configs.Backend, l *Load, now time.Time) fleetDecision {
	return fleetLimit(fleetInput{
		Configured: int64(cb.Capacity),
		Instances:  s.cfg.Fleet.Instances,
		Report:     l,
		Now:        now,
		Interval:   s.cfg.Poll.Interval,
	})
}

// storeLimits sets the limit of every member of s, a snapshot about to be published, from the
// load reports it was built with. Every limit is at most its member's capacity, which the
// block hints of the snapshot's candidate sets are an upper bound for (hints.go). The caller
// holds the balancer's mutex and has marked the sets of the replaced snapshot stale.
func storeLimits(s *Snapshot, now time.Time) {
	for _, m := range s.members {
		m.b.limit.Store(s.decide(m.cfg, m.b.load.Load(), now).Limit)
	}
}

// observeLoad keeps a check's load report and updates the backend's limit. A report seen for
// the first time is stamped with this instance's in-flight on the backend (mine_then); the
// same report again (a failed check that fall > 1 keeps ready) keeps its stamp.
func (b *Balancer) observeLoad(rt *Backend, o Observation) {
	var l *Load
	if o.Ready && o.Load != nil {
		cur := rt.load.Load()
		if cur != nil && cur.At.Equal(o.Load.At) && cur.InFlight == o.Load.InFlight && cur.Capacity == o.Load.Capacity {
			l = cur
		} else {
			fresh := &Load{Load: *o.Load, MineThen: rt.InFlight(), LimitThen: rt.limit.Load()}
			if cur != nil {
				fresh.PrevOthers, fresh.PrevAt = cur.others(), cur.At
			}
			l = fresh
		}
	}
	rt.load.Store(l)
	b.refreshLimit(rt)
}

// expireLoads recomputes the limit of every backend whose report has grown too old, so a
// backend that stopped answering with reports falls back to its equal share.
func (b *Balancer) expireLoads() {
	s := b.snap.Load()
	now := b.now()
	for _, m := range s.members {
		if l := m.b.load.Load(); l != nil && reportStale(l.At, now, s.cfg.Poll.Interval) {
			b.refreshLimit(m.b)
		}
	}
}

// refreshLimit recomputes rt's limit from its report. Most checks change nothing and take no
// lock. A new limit is stored under the mutex, computed against the snapshot then current, so
// it never exceeds the capacity the current candidate sets were built with; a new capacity (a
// report gave one, or it expired) rebuilds the snapshot.
func (b *Balancer) refreshLimit(rt *Backend) {
	now := b.now()
	s := b.snap.Load()
	m := s.byID[rt.ID]
	if m == nil || m.b != rt {
		return
	}
	if d := s.decide(m.cfg, rt.load.Load(), now); d.Capacity == m.capacity && d.Limit == rt.limit.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s = b.snap.Load()
	m = s.byID[rt.ID]
	if m == nil || m.b != rt {
		return
	}
	d := s.decide(m.cfg, rt.load.Load(), now)
	if d.Capacity != m.capacity {
		b.rebuildLocked()
		return
	}
	rt.limit.Store(d.Limit)
}

// lowerToHeld lowers the limit of the backend of l, which refused l as full, to what this
// instance has in flight on it without l, until its next report: the refusal says the backend is
// full now, so sending more before that report would only be refused again. A backend that a
// reload removed or replaced since l's snapshot is left alone. Lowering a limit is always safe
// for the block hints (hints.go).
func lowerToHeld(l Lease) {
	rt := l.Backend
	m := l.snap.byID[rt.ID]
	if m == nil || m.b != rt {
		return
	}
	next := max(0, rt.InFlight()-1)
	for {
		cur := rt.limit.Load()
		if next >= cur || rt.limit.CompareAndSwap(cur, next) {
			return
		}
	}
}
