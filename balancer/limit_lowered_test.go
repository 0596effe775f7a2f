package balancer

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

// A limit lowered between a request's pick and its take: the pick read the old limit (8) with
// 3 in flight; a reload to capacity 2, or a refusal as full (which lowers the limit to what is
// in flight without the refused lease), publishes a lower one before the take. The take must
// go by the limit current then and refuse, not take a 4th slot on the old limit.
func TestTakeAfterLimitLoweredSincePick(t *testing.T) {
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	cases := []struct {
		name  string
		lower func(bal *Balancer, held []Lease)
		want  int64 // the limit after the lowering
	}{
		{name: "reload lowers the capacity", want: 2, lower: func(bal *Balancer, _ []Lease) {
			bal.Update(configtest.New(apps, []configs.Backend{{ID: "a", Address: "127.0.0.1:20041", Capacity: 2}}))
		}},
		{name: "refusal as full lowers the limit", want: 2, lower: func(bal *Balancer, held []Lease) {
			bal.Report(Result{Outcome: RefusedFull, App: held[0].snap.AppByName("www"), Lease: held[0]})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bal := newTestBalancer(t, configtest.New(apps, []configs.Backend{{ID: "a", Address: "127.0.0.1:20041", Capacity: 8}}), nil)
			markReady(bal, []string{"a"})
			held, s, m, limit := holdThenPick(t, bal, 3, "a")
			tc.lower(bal, held)
			if got := m.b.limit.Load(); got != tc.want {
				t.Fatalf("limit %d after the lowering, want %d", got, tc.want)
			}
			if s.takeSlot(m, limit, time.Time{}) {
				held = append(held, Lease{Backend: m.b})
				t.Errorf("took a slot with %d in flight on limit %d (the pick's limit was %d)", m.b.InFlight(), tc.want, limit)
			}
			if got := m.b.InFlight(); got != int64(len(held)) {
				t.Errorf("%d in flight, want %d (a refused take gives its slot back)", got, len(held))
			}
			for i := range held {
				held[i].Release()
			}
			if got := m.b.InFlight(); got != 0 {
				t.Errorf("%d in flight after every release", got)
			}
		})
	}
}

// holdThenPick takes n leases of app www on a balancer whose backends have capacity 8, then
// picks in the snapshot current then, as a request does before it takes its slot. It returns
// the leases, that snapshot, the member picked and the limit the pick read; the test fails
// unless the pick found backend id under the limit 8.
func holdThenPick(t *testing.T, bal *Balancer, n int, id string) (held []Lease, s *Snapshot, m *member, limit int64) {
	t.Helper()
	for range n {
		s := bal.Snapshot()
		l, err := bal.Acquire(s, s.AppByName("www"), nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	s = bal.Snapshot()
	app := s.AppByName("www")
	set := app.primary.current()
	m, limit = s.pick(app.primary, set, 0, nil, time.Time{})
	if m == nil || m.b.ID != id || limit != 8 {
		t.Fatalf("pick: %v under limit %d, want backend %s under 8", m, limit, id)
	}
	return held, s, m, limit
}

// TestLimitLoweredUnderConcurrentLeases runs leases from several goroutines while the capacity
// is reloaded down from 8 to 2 and back, round after round. Once a lowering is published and
// the count has fallen within it, no lease may take the count past it: every lease a goroutine
// takes after seeing that (held counts the leases held, at most what is in flight) must find at
// most 2 held. Run it under -race.
func TestLimitLoweredUnderConcurrentLeases(t *testing.T) {
	const (
		high, low = 8, 2
		workers   = 6
		rounds    = 40
	)
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	cfgAt := func(capacity int) *configs.Config {
		return configtest.New(apps, []configs.Backend{{ID: "a", Address: "127.0.0.1:20051", Capacity: capacity}})
	}
	bal := newTestBalancer(t, cfgAt(high), nil)
	markReady(bal, []string{"a"})
	slot := bal.Snapshot().byID["a"].slot

	var (
		phase      atomic.Int64 // odd: a lowering to low is published and the count is within it
		held       atomic.Int64 // leases held by the workers
		taken      atomic.Int64 // leases taken so far
		worst      atomic.Int64 // the most held seen by a lease taken while settled
		unexpected = make(chan error, workers)
	)
	stop := testproc.Workers(workers, func(_, _ int) bool {
		before := phase.Load() // read before the take: the take comes after it
		s := bal.Snapshot()
		l, err := bal.Acquire(s, s.AppByName("www"), nil)
		if errors.Is(err, ErrNoCandidate) {
			runtime.Gosched()
			return true
		}
		if err != nil {
			unexpected <- err
			return false
		}
		h := held.Add(1)
		// The same odd phase after: the capacity was not raised again before h was counted.
		if before%2 == 1 && phase.Load() == before {
			raiseTo(&worst, h)
		}
		taken.Add(1)
		held.Add(-1)
		l.Release()
		return true
	})
	progress := func(what string) {
		from := taken.Load()
		testproc.WaitFor(t, 10*time.Second, what, func() bool { return taken.Load() >= from+50 })
	}
	for range rounds {
		progress("leases under the high capacity")
		bal.Update(cfgAt(low))
		testproc.WaitFor(t, 10*time.Second, "the count to fall within the lowered capacity", func() bool {
			return slot.count() <= low
		})
		phase.Add(1)
		progress("leases under the lowered capacity")
		phase.Add(1)
		bal.Update(cfgAt(high))
	}
	stop()
	close(unexpected)
	for err := range unexpected {
		t.Fatal(err)
	}
	if w := worst.Load(); w > low {
		t.Errorf("a lease taken after the lowering to %d was settled found %d held", low, w)
	}
	if w := worst.Load(); w == 0 {
		t.Error("no lease was taken while the lowered capacity was settled: the test proved nothing")
	}
	if n := slot.count(); n != 0 {
		t.Errorf("%d in flight after every release", n)
	}
}

// TestRefusedTakeInsideQueueDispatch: the queue's dispatch takes slots for waiters while it
// holds the queue's lock. A take it makes that the re-read limit refuses (the limit was lowered
// since the pick) must give the slot back without waking the queue, which would take that lock
// again: before the fix this deadlocked the balancer (every request and /api/state of the pool
// hung in an end-to-end queue burst).
func TestRefusedTakeInsideQueueDispatch(t *testing.T) {
	cfg, ids := queueCfg(time.Minute, 10, 8)
	bal := newTestBalancer(t, cfg, nil)
	markReady(bal, ids)
	held, s, m, limit := holdThenPick(t, bal, 3, "q0")
	bal.Report(Result{Outcome: RefusedFull, App: s.AppByName("www"), Lease: held[0]}) // lowers the limit to what is held: 2
	q := m.slot.queues
	q.waiting.Add(1) // a waiter is queued, as when dispatch runs
	defer q.waiting.Add(-1)
	q.mu.Lock() // dispatch holds the lock while it takes
	done := make(chan bool)
	go func() { done <- s.takeSlot(m, limit, time.Time{}) }()
	select {
	case took := <-done:
		q.mu.Unlock()
		if took {
			t.Errorf("took a slot over the lowered limit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a refused take inside the queue's dispatch waited for the queue's lock (deadlock)")
	}
	if got := m.b.InFlight(); got != 3 {
		t.Errorf("%d in flight, want 3 (the refused take gave its slot back)", got)
	}
	for i := range held {
		held[i].Release()
	}
}
