package balancer

import "fmt"

// Report takes what one forward learned (ports.go): the feedback port from the proxy. It is the
// one place a forward's result changes scheduling (a failure streak, an ejection, a limit
// lowered after a refusal) and the one place pool_exhausted is raised. It never blocks and
// allocates nothing; a Result for a lease is reported while the lease is still held.
func (b *Balancer) Report(r Result) {
	switch r.Outcome {
	case Answered:
		if ejectsAnswer(r.Code, r.Lease.snap.cfg.Proxy.EjectOn5xx) {
			b.countFailure(r.Lease)
			return
		}
		if rt := r.Lease.Backend; rt.failStreak.Load() != 0 {
			rt.failStreak.Store(0)
		}
	case RefusedFull:
		r.Lease.Backend.full.Inc()
		lowerToHeld(r.Lease)
	case Failed, TimedOut:
		reason := r.Reason
		if r.Outcome == TimedOut {
			reason = ErrorTimeout
		}
		rt := r.Lease.Backend
		rt.errors[reason].Inc()
		b.logFailure(rt, r.App.Name, r.Lease.Pool, reason, r.Err)
		if ejects(reason) {
			b.countFailure(r.Lease)
		}
	case Exhausted:
		app := r.App
		app.counters.exhausted.Inc()
		b.observer.Exhausted(app.Pool, app.Name, app.Service, app.AllowFallback)
	}
}

// countFailure adds one to the failure streak of l's backend; proxy.eject_after in a row (in the
// settings l was taken under) take it out of scheduling until its next good check.
func (b *Balancer) countFailure(l Lease) {
	rt := l.Backend
	n := rt.failStreak.Add(1)
	limit := int64(l.snap.cfg.Proxy.EjectAfter)
	if limit > 0 && n >= limit && rt.ejected.CompareAndSwap(false, true) {
		b.events.Add("ejected", fmt.Sprintf("backend %s ejected after %d failed forwards", rt.ID, n))
		b.log.Warn("backend ejected until its next good check", "backend", rt.ID, "failures", n)
	}
}
