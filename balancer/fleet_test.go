package balancer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/protocol"
)

func TestFleetLimit(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := time.Second
	// fresh is a report that arrived at t0: inFlight requests on the backend, mine of them
	// this instance's.
	fresh := func(inFlight, mine int64) *Load {
		return &Load{Load: protocol.Load{InFlight: inFlight, At: t0}, MineThen: mine}
	}
	tests := []struct {
		name string
		in   fleetInput // computed at t0, with a poll interval of a second unless it says one
		want fleetDecision
	}{
		{name: "one instance, no report: the whole capacity",
			in:   fleetInput{Configured: 64, Instances: 1},
			want: fleetDecision{Capacity: 64, Limit: 64}},
		{name: "three instances, no report: ceil(8/3)",
			in:   fleetInput{Configured: 8, Instances: 3},
			want: fleetDecision{Capacity: 8, Limit: 3}},
		{name: "exact share without a report",
			in:   fleetInput{Configured: 9, Instances: 3},
			want: fleetDecision{Capacity: 9, Limit: 3}},
		{name: "more instances than capacity: still one each",
			in:   fleetInput{Configured: 2, Instances: 5},
			want: fleetDecision{Capacity: 2, Limit: 1}},
		{name: "instances 0 is treated as 1",
			in:   fleetInput{Configured: 10, Instances: 0},
			want: fleetDecision{Capacity: 10, Limit: 10}},
		{name: "fresh report, others hold 5 of 8",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 7, At: t0.Add(-500 * time.Millisecond)}, MineThen: 2}},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true}},
		{name: "fresh report, the backend idle: the whole capacity alone",
			in:   fleetInput{Configured: 8, Instances: 1, Report: fresh(0, 0)},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "fresh report, the backend idle, three instances: a rise paced to ceil(8/3)",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(0, 0)},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true, Paced: true}},
		{name: "fresh report, all in flight is mine: mine + ceil(2 free / 3)",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(6, 6)},
			want: fleetDecision{Capacity: 8, Limit: 7, Fresh: true, Paced: true}},
		{name: "fresh report, all in flight is mine, one free: the whole capacity",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(7, 7)},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "a rise paced by the share of what was free: 2 + ceil(4 free / 2)",
			in:   fleetInput{Configured: 8, Instances: 2, Report: fresh(4, 2)},
			want: fleetDecision{Capacity: 8, Limit: 4, Fresh: true, Paced: true}},
		{name: "a fall is not paced: the others took all but one",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 1)},
			want: fleetDecision{Capacity: 8, Limit: 1, Fresh: true}},
		{name: "one instance: never paced",
			in:   fleetInput{Configured: 8, Instances: 1, Report: fresh(2, 1)},
			want: fleetDecision{Capacity: 8, Limit: 7, Fresh: true}},
		{name: "reported below mine_then (my requests ended first): others is 0",
			in:   fleetInput{Configured: 8, Instances: 1, Report: fresh(1, 4)},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "reported below mine_then, three instances: paced from mine, 4 + ceil(4 / 3)",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(1, 4)},
			want: fleetDecision{Capacity: 8, Limit: 6, Fresh: true, Paced: true}},
		{name: "others hold it all: nothing left",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 0)},
			want: fleetDecision{Capacity: 8, Limit: 0, Fresh: true}},
		{name: "others over capacity: 0, never negative",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(12, 1)},
			want: fleetDecision{Capacity: 8, Limit: 0, Fresh: true}},
		{name: "full, holding it all while others are idle: one slot back",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 8)},
			want: fleetDecision{Capacity: 8, Limit: 7, Fresh: true}},
		{name: "full, holding more than a share and than the others together: one slot back",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 5)},
			want: fleetDecision{Capacity: 8, Limit: 4, Fresh: true}},
		{name: "full, holding no more than the others together: keeps it",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 4)},
			want: fleetDecision{Capacity: 8, Limit: 4, Fresh: true}},
		{name: "full, holding an equal share: keeps it",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(8, 3)},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true}},
		{name: "not full: no slot back",
			in:   fleetInput{Configured: 8, Instances: 3, Report: fresh(7, 7)},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "one instance alone: others' load leaves what is left, down to 0",
			in:   fleetInput{Configured: 8, Instances: 1, Report: fresh(9, 0)},
			want: fleetDecision{Capacity: 8, Limit: 0, Fresh: true}},
		{name: "more instances than capacity: no floor",
			in:   fleetInput{Configured: 2, Instances: 5, Report: fresh(2, 0)},
			want: fleetDecision{Capacity: 2, Limit: 0, Fresh: true}},
		{name: "reported capacity wins over the configured one",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 10, Capacity: 32, At: t0}, MineThen: 4}},
			want: fleetDecision{Capacity: 32, Limit: 4 + 8, Fresh: true, Paced: true}}, // 32-6 paced: 4 + ceil(22/3)
		{name: "reported capacity below the configured one wins too",
			in: fleetInput{Configured: 100, Instances: 1,
				Report: &Load{Load: protocol.Load{InFlight: 3, Capacity: 4, At: t0}}},
			want: fleetDecision{Capacity: 4, Limit: 1, Fresh: true}},
		{name: "a lone instance never gives a slot back",
			in:   fleetInput{Configured: 8, Instances: 1, Report: fresh(8, 8)},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "the share follows the reported capacity",
			in: fleetInput{Configured: 100, Instances: 2,
				Report: &Load{Load: protocol.Load{InFlight: 4, Capacity: 4, At: t0}, MineThen: 4}},
			want: fleetDecision{Capacity: 4, Limit: 3, Fresh: true}},
		{name: "report exactly 3 intervals old is still fresh",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0.Add(-3 * sec)}}},
			want: fleetDecision{Capacity: 8, Limit: 2, Fresh: true, Paced: true}}, // 5 paced: ceil(5/3)
		{name: "report older than 3 intervals counts as none (its capacity too)",
			in: fleetInput{Configured: 8, Instances: 2,
				Report: &Load{Load: protocol.Load{InFlight: 6, Capacity: 40, At: t0.Add(-3*sec - time.Millisecond)}}},
			want: fleetDecision{Capacity: 8, Limit: 4}},
		{name: "staleness scales with the interval",
			in: fleetInput{Configured: 8, Instances: 2, Interval: 100 * time.Millisecond,
				Report: &Load{Load: protocol.Load{InFlight: 6, At: t0.Add(-time.Second)}}},
			want: fleetDecision{Capacity: 8, Limit: 4}},
		{name: "a rise waits for a second report: the previous report's others still count",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0}, MineThen: 2, PrevOthers: 5, PrevAt: t0.Add(-sec)}},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true}},
		{name: "two reports agree: the limit rises",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0}, MineThen: 2, PrevOthers: 1, PrevAt: t0.Add(-25 * time.Millisecond)}},
			want: fleetDecision{Capacity: 8, Limit: 4, Fresh: true, Paced: true}}, // 7 paced: 2 + ceil(5/3)
		{name: "others grew since the previous report: the latest counts at once",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 8, At: t0}, MineThen: 2, PrevOthers: 1, PrevAt: t0.Add(-sec)}},
			want: fleetDecision{Capacity: 8, Limit: 2, Fresh: true}},
		{name: "a previous report older than 3 intervals does not count",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0}, MineThen: 2, PrevOthers: 5, PrevAt: t0.Add(-3*sec - time.Millisecond)}},
			want: fleetDecision{Capacity: 8, Limit: 4, Fresh: true, Paced: true}}, // 7 paced: 2 + ceil(5/3)
		{name: "the previous report's others are what is left of a reported capacity too",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 0, Capacity: 32, At: t0}, PrevOthers: 20, PrevAt: t0.Add(-sec)}},
			want: fleetDecision{Capacity: 32, Limit: 4, Fresh: true, Paced: true}}, // 12 paced: ceil(12/3)
		{name: "a paced rise keeps the limit the previous fresh report gave: 3 + ceil(5/3) = 5 kept at 6",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0}, MineThen: 3, LimitThen: 6, PrevAt: t0.Add(-25 * time.Millisecond)}},
			want: fleetDecision{Capacity: 8, Limit: 6, Fresh: true, Paced: true}},
		{name: "the kept limit reaching what the others leave: not paced",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 1, At: t0}, MineThen: 1, LimitThen: 8, PrevAt: t0.Add(-sec)}},
			want: fleetDecision{Capacity: 8, Limit: 8, Fresh: true}},
		{name: "what the others leave below the limit it had: falls at once, paced as before",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 5, At: t0}, MineThen: 2, LimitThen: 6, PrevOthers: 3, PrevAt: t0.Add(-sec)}},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true, Paced: true}}, // 8-3 = 5 < 6, paced: 2 + ceil(3/3)
		{name: "no previous report: the limit it had (a static share) is not kept",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 0, At: t0}, LimitThen: 6}},
			want: fleetDecision{Capacity: 8, Limit: 3, Fresh: true, Paced: true}},
		{name: "a previous report older than 3 intervals: the limit it gave is not kept",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0}, MineThen: 3, LimitThen: 6, PrevAt: t0.Add(-3*sec - time.Millisecond)}},
			want: fleetDecision{Capacity: 8, Limit: 5, Fresh: true, Paced: true}},
		{name: "a report from the future (clock step) is fresh",
			in: fleetInput{Configured: 8, Instances: 3,
				Report: &Load{Load: protocol.Load{InFlight: 3, At: t0.Add(time.Minute)}}},
			want: fleetDecision{Capacity: 8, Limit: 2, Fresh: true, Paced: true}}, // 5 paced: ceil(5/3)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now = t0
			if in.Interval == 0 {
				in.Interval = sec
			}
			if got := fleetLimit(in); got != tt.want {
				t.Errorf("fleetLimit(%+v) = %+v, want %+v", in, got, tt.want)
			}
		})
	}
}

func TestRampLimit(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		elapsed   time.Duration
		slowStart time.Duration
		want      int64
	}{
		{name: "off", limit: 40, elapsed: 0, slowStart: 0, want: 40},
		{name: "just ready: 10%", limit: 100, elapsed: 0, slowStart: 10 * time.Second, want: 10},
		{name: "half way", limit: 100, elapsed: 5 * time.Second, slowStart: 10 * time.Second, want: 55},
		{name: "done", limit: 100, elapsed: 10 * time.Second, slowStart: 10 * time.Second, want: 100},
		{name: "a small fleet share still gets one", limit: 3, elapsed: 0, slowStart: 10 * time.Second, want: 1},
		{name: "a limit of 0 stays 0", limit: 0, elapsed: 0, slowStart: 10 * time.Second, want: 0},
		{name: "clock step back counts as just ready", limit: 100, elapsed: -time.Second, slowStart: 10 * time.Second, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rampLimit(tt.limit, tt.elapsed, tt.slowStart); got != tt.want {
				t.Errorf("rampLimit(%d, %v, %v) = %d, want %d", tt.limit, tt.elapsed, tt.slowStart, got, tt.want)
			}
		})
	}
}

// fleetFixture is a balancer with a settable clock, fleet.instances 3 and two backends of
// capacity 8, both ready.
type fleetFixture struct {
	bal *Balancer
	app *App
	now time.Time
}

func newFleetFixture(t *testing.T, instances int) *fleetFixture {
	t.Helper()
	f := &fleetFixture{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}},
		[]configs.Backend{{ID: "a", Capacity: 8}, {ID: "b", Capacity: 8}})
	cfg.Fleet.Instances = instances
	bal, err := New(Options{Config: cfg, Registerer: prometheus.NewRegistry(),
		Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.bal = bal
	f.observe("a", nil)
	f.observe("b", nil)
	f.app = bal.Snapshot().AppByName("www")
	return f
}

// observe reports a good check of id at the fixture's clock, with load report l (nil: none).
func (f *fleetFixture) observe(id string, l *protocol.Load) {
	if l != nil {
		l.At = f.now
	}
	f.bal.Observe(Observation{ID: id, Ready: true, Checked: f.now, Load: l,
		Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}})
}

func (f *fleetFixture) limit(id string) int64 {
	for _, m := range f.members() {
		if m.Backend.ID == id {
			return m.Limit
		}
	}
	return -1
}

// members is the quiet read of the current snapshot at the fixture's clock.
func (f *fleetFixture) members() []Member { return f.bal.Snapshot().Members(f.now) }

// fill takes leases until Acquire fails and returns how many it took on each backend.
func (f *fleetFixture) fill(t *testing.T) (map[string]int, []Lease) {
	t.Helper()
	got := map[string]int{}
	var leases []Lease
	for i := 0; i < 100; i++ {
		s := f.bal.Snapshot()
		l, err := f.bal.Acquire(s, s.AppByName(f.app.Name), nil) // the current snapshot's lists and hints
		if err != nil {
			return got, leases
		}
		got[l.Backend.ID]++
		leases = append(leases, l)
	}
	t.Fatal("Acquire never ran out")
	return nil, nil
}

// takeOnA takes k leases with b excluded, so that each must land on a, as a busy client of a
// would; the test fails when one is refused.
func (f *fleetFixture) takeOnA(t *testing.T, k int) []Lease {
	t.Helper()
	var ls []Lease
	for i := range k {
		s := f.bal.Snapshot()
		l, err := f.bal.Acquire(s, s.AppByName(f.app.Name), &Tried{n: 1, bs: [MaxTried]*Backend{s.byID["b"].b}})
		if err != nil {
			release(ls)
			t.Fatalf("lease %d of %d on a: %v", i+1, k, err)
		}
		if l.Backend.ID != "a" {
			release(append(ls, l))
			t.Fatalf("lease %d of %d on %s, b excluded: want a", i+1, k, l.Backend.ID)
		}
		ls = append(ls, l)
	}
	return ls
}

func release(ls []Lease) {
	for _, l := range ls {
		l.Release()
	}
}

func TestFleetLimitSchedules(t *testing.T) {
	for _, tt := range []struct {
		name      string
		instances int
		want      int // leases on each backend
	}{
		{name: "without reports each instance takes ceil(8/3) of each backend", instances: 3, want: 3},
		{name: "one instance without reports keeps the whole capacity", instances: 1, want: 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleetFixture(t, tt.instances)
			got, ls := f.fill(t)
			defer release(ls)
			if got["a"] != tt.want || got["b"] != tt.want {
				t.Fatalf("leases %v, want %d on each", got, tt.want)
			}
		})
	}
	t.Run("a fresh report leaves this instance its share of what the others do not use", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 5}) // the other instances hold 5 of a's 8
		f.observe("b", &protocol.Load{InFlight: 0})
		// 8 - 5 = 3 and 8, paced: ceil(3/3) = 1 and ceil(8/3) = 3.
		if f.limit("a") != 1 || f.limit("b") != 3 {
			t.Fatalf("limits a=%d b=%d, want 1 and 3", f.limit("a"), f.limit("b"))
		}
		got, ls := f.fill(t)
		defer release(ls)
		if got["a"] != 1 || got["b"] != 3 {
			t.Fatalf("leases %v, want a=1 b=3", got)
		}
	})
	t.Run("a busy instance alone: the limit rises step by step, each step asked for soon", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		var ls []Lease
		defer func() { release(ls) }()
		take := func(limit int64) { // busy: it takes every slot it may
			ls = append(ls, f.takeOnA(t, int(limit)-len(ls))...)
		}
		// The first report: ceil(8/3) = 3, what it had without one; not a rise.
		f.observe("a", &protocol.Load{InFlight: 0})
		if limit, after := f.limit("a"), f.bal.ConfirmAfter("a"); limit != 3 || after != 0 {
			t.Fatalf("first report: limit %d, confirm after %v; want 3 and nothing to confirm", limit, after)
		}
		take(3)
		var steps []int64
		for range 10 {
			f.now = f.now.Add(confirmAfter)
			f.observe("a", &protocol.Load{InFlight: int64(len(ls))}) // all of it mine
			limit, after := f.limit("a"), f.bal.ConfirmAfter("a")
			steps = append(steps, limit)
			if want := confirmAfter; limit == 8 {
				if after != 0 {
					t.Fatalf("limit 8 reached: confirm after %v, want nothing to confirm", after)
				}
				break
			} else if after != want {
				t.Fatalf("limit %d still rising: confirm after %v, want %v", limit, after, want)
			}
			take(limit)
		}
		if !slices.Equal(steps, []int64{5, 6, 7, 8}) {
			t.Fatalf("limits %v, want 5 6 7 8", steps)
		}
	})
	t.Run("mine_then: my own in-flight in the report is not counted as others'", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 0})
		defer release(f.takeOnA(t, 2))
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 6}) // my 2 and the others' 4
		if got := f.bal.Snapshot().byID["a"].b.Load().MineThen; got != 2 {
			t.Fatalf("mine_then %d, want 2", got)
		}
		if got := f.limit("a"); got != 3 {
			t.Fatalf("limit %d, want 8 - (6 - 2) = 4 paced to 2 + ceil((8 - 6) / 3) = 3", got)
		}
	})
	t.Run("ranking by limit - mine steers to the most spare fleet-wide", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 6}) // a: limit 2, paced to ceil(2/3) = 1
		f.observe("b", &protocol.Load{InFlight: 0}) // b: limit 8, paced to ceil(8/3) = 3
		var order []string
		for range 4 {
			l, err := f.bal.Acquire(f.bal.Snapshot(), f.app, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			order = append(order, l.Backend.ID)
		}
		// b has 3 spare against a's 1: b takes the first two, then they alternate.
		for i, id := range order[:2] {
			if id != "b" {
				t.Fatalf("lease %d on %s, want b first while it has more spare: %v", i, id, order)
			}
		}
	})
	t.Run("a report older than 3 intervals counts as none after the round", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 7})
		if got := f.limit("a"); got != 1 {
			t.Fatalf("fresh: limit %d, want 1", got)
		}
		f.now = f.now.Add(3 * time.Second)
		f.bal.RoundDone()
		if got := f.limit("a"); got != 1 {
			t.Fatalf("3 intervals old: limit %d, want 1 still", got)
		}
		f.now = f.now.Add(time.Millisecond)
		f.bal.RoundDone()
		if got := f.limit("a"); got != 3 {
			t.Fatalf("older than 3 intervals: limit %d, want ceil(8/3) = 3", got)
		}
		if st := f.members()[0]; st.Load != nil {
			t.Fatalf("state shows a stale report: %+v", st.Load)
		}
	})
	t.Run("a reported capacity wins, and goes when the report does", func(t *testing.T) {
		f := newFleetFixture(t, 1)
		f.observe("a", &protocol.Load{InFlight: 0, Capacity: 20})
		st := f.members()[0]
		if st.Capacity != 20 || st.Limit != 20 {
			t.Fatalf("capacity %d limit %d, want 20 and 20", st.Capacity, st.Limit)
		}
		got, ls := f.fill(t)
		release(ls)
		if got["a"] != 20 {
			t.Fatalf("leases on a %d, want 20", got["a"])
		}
		f.observe("a", &protocol.Load{InFlight: 2, Capacity: 4})
		if st := f.members()[0]; st.Capacity != 4 || st.Limit != 2 {
			t.Fatalf("capacity %d limit %d, want 4 and 2", st.Capacity, st.Limit)
		}
		f.observe("a", nil)
		if st := f.members()[0]; st.Capacity != 8 || st.Limit != 8 {
			t.Fatalf("no report: capacity %d limit %d, want the configured 8", st.Capacity, st.Limit)
		}
	})
	t.Run("the same report again keeps its mine_then", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		l := &protocol.Load{InFlight: 4}
		f.observe("a", l)
		lease, err := f.bal.Acquire(f.bal.Snapshot(), f.app, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release()
		// A failed check under fall > 1: still ready, the last good answer's report again.
		f.bal.Observe(Observation{ID: "a", Ready: true, Reason: "status 503", Checked: f.now.Add(time.Second),
			Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}, Load: &protocol.Load{InFlight: 4, At: l.At}})
		if got := f.bal.Snapshot().byID["a"].b.Load().MineThen; got != 0 {
			t.Fatalf("mine_then %d, want 0 (taken when the report first arrived)", got)
		}
	})
	t.Run("a refusal lowers the limit to what is in flight until the next report", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 0}) // a: limit 8, paced to ceil(8/3) = 3
		ls := f.takeOnA(t, 3)
		f.bal.Report(Result{Outcome: RefusedFull, App: f.app, Lease: ls[2]}) // the backend refused the third
		ls[2].Release()
		defer release(ls[:2])
		if got := f.limit("a"); got != 2 {
			t.Fatalf("after the refusal: limit %d, want the 2 still in flight", got)
		}
		if got := testutil.ToFloat64(f.bal.metrics.full.WithLabelValues("a")); got != 1 {
			t.Fatalf("pollbal_backend_full_total{backend=a} = %v, want 1", got)
		}
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 2})
		if got := f.limit("a"); got != 4 {
			t.Fatalf("after the next report: limit %d, want 8 paced to 2 + ceil(6/3) = 4", got)
		}
	})
	t.Run("a limit rises on a second report, asked for soon; it falls at once", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 5})
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 1 || after != 0 {
			t.Fatalf("first report, others 5: limit %d, confirm after %v; want 8 - 5 paced to ceil(3/3) = 1, and nothing to confirm", got, after)
		}
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 1}) // others 1: perhaps a request between two of its client's
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 1 || after != confirmAfter {
			t.Fatalf("others down to 1: limit %d, confirm after %v; want 1 until confirmed, and %v", got, after, confirmAfter)
		}
		f.now = f.now.Add(confirmAfter)
		f.observe("a", &protocol.Load{InFlight: 1})
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 3 || after != confirmAfter {
			t.Fatalf("confirmed: limit %d, confirm after %v; want 8 - 1 paced to ceil(7/3) = 3, still rising: %v", got, after, confirmAfter)
		}
		f.now = f.now.Add(confirmAfter)
		f.observe("a", &protocol.Load{InFlight: 1}) // this instance took nothing meanwhile
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 3 || after != 0 {
			t.Fatalf("idle: limit %d, confirm after %v; want 3, no longer rising, and nothing to confirm", got, after)
		}
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 6})
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 1 || after != 0 {
			t.Fatalf("others up to 6: limit %d, confirm after %v; want 1 at once and nothing to confirm", got, after)
		}
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 8})
		f.now = f.now.Add(time.Second)
		f.observe("a", &protocol.Load{InFlight: 2}) // the backend went idle meanwhile, but not confirmed yet
		f.now = f.now.Add(3*time.Second + time.Millisecond)
		f.bal.RoundDone() // both reports stale: an equal share
		if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != 3 || after != 0 {
			t.Fatalf("stale reports: limit %d, confirm after %v; want ceil(8/3) = 3 and nothing to confirm", got, after)
		}
		if after := f.bal.ConfirmAfter("nosuch"); after != 0 {
			t.Fatalf("unknown backend: confirm after %v, want 0", after)
		}
	})
	t.Run("a busy instance keeps rising when its clients are between requests at a check; an idle one asks for nothing", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		var ls []Lease
		take := func(k int) {
			t.Helper()
			ls = append(ls, f.takeOnA(t, k)...)
		}
		giveBack := func(k int) {
			release(ls[len(ls)-k:])
			ls = ls[:len(ls)-k]
		}
		defer func() { release(ls) }()
		check := func(inFlight, wantLimit int64, wantAfter time.Duration, what string) {
			t.Helper()
			f.now = f.now.Add(confirmAfter)
			f.observe("a", &protocol.Load{InFlight: inFlight})
			if got, after := f.limit("a"), f.bal.ConfirmAfter("a"); got != wantLimit || after != wantAfter {
				t.Fatalf("%s: limit %d, confirm after %v; want %d and %v", what, got, after, wantLimit, wantAfter)
			}
		}
		check(0, 3, 0, "first report, idle backend: ceil(8/3), nothing in use")
		take(3)
		check(3, 5, confirmAfter, "3 in use: 3 + ceil(5/3), rising")
		take(2)
		check(5, 6, confirmAfter, "5 in use: 5 + ceil(3/3), rising")
		giveBack(3)
		check(2, 6, 0, "2 of 6 in use: 6 kept, under half of it in use: nothing to confirm")
		take(1)
		check(3, 6, confirmAfter, "3 of 6 in use (clients between requests): 6 kept, half of it in use: still asks")
		take(3)
		check(6, 7, confirmAfter, "6 in use: 6 + ceil(2/3)")
		take(1)
		check(7, 8, 0, "7 in use: the whole capacity, nothing to confirm")
		giveBack(7)
		check(0, 8, 0, "idle: the whole capacity kept while the others hold nothing, nothing to confirm")
		f.now = f.now.Add(time.Second)
		check(4, 2, 0, "the others took 4: falls at once to 0 + ceil(4/3)")
	})
	t.Run("state and metric show the limit and the report", func(t *testing.T) {
		f := newFleetFixture(t, 3)
		f.observe("a", &protocol.Load{InFlight: 5, Capacity: 8})
		f.now = f.now.Add(250 * time.Millisecond)
		st := f.members()
		if l := st[0].Load; l == nil || l.InFlight != 5 || l.Capacity != 8 || f.now.Sub(l.At) != 250*time.Millisecond {
			t.Fatalf("a's load %+v, want 5 of 8, 250ms old", l)
		}
		if st[0].Limit != 1 || st[1].Limit != 3 || st[1].Load != nil {
			t.Fatalf("limits %d/%d load b %+v, want 8 - 5 paced to 1, 3 and null", st[0].Limit, st[1].Limit, st[1].Load)
		}
		reg := prometheus.NewRegistry()
		if err := reg.Register(f.bal.metrics); err != nil {
			t.Fatal(err)
		}
		want := "# HELP pollbal_backend_limit " + "Requests this instance may have in flight on the backend now: its share of the capacity for the fleet (fleet.instances, load reports), slow start applied.\n" +
			"# TYPE pollbal_backend_limit gauge\npollbal_backend_limit{backend=\"a\"} 1\npollbal_backend_limit{backend=\"b\"} 3\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pollbal_backend_limit"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFleetLimitUnderConcurrentReports takes and releases leases while reports change the
// backend's capacity (so snapshots are rebuilt) and its limit underneath. In-flight never
// exceeds the largest capacity reported, every count returns to zero, and once the reports
// settle the block hints let a fill reach exactly the final limit.
func TestFleetLimitUnderConcurrentReports(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "a", Capacity: 8}, {ID: "b", Capacity: 8}})
	cfg.Fleet.Instances = 2
	bal := newTestBalancer(t, cfg, nil)
	markReady(bal, []string{"a", "b"})
	app := bal.Snapshot().AppByName("www")
	const maxReported = 12
	var peak atomic.Int64
	stop := testproc.Workers(4, func(_, _ int) bool {
		if l, err := bal.Acquire(bal.Snapshot(), app, nil); err == nil {
			raiseTo(&peak, l.Backend.InFlight())
			l.Release()
		}
		return true
	})
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		for _, id := range []string{"a", "b"} {
			l := &protocol.Load{InFlight: int64(rng.IntN(10)), Capacity: []int64{0, 4, maxReported}[rng.IntN(3)], At: time.Now()}
			bal.Observe(Observation{ID: id, Ready: true, Checked: time.Now(), Load: l,
				Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}})
		}
	}
	stop()
	if p := peak.Load(); p > maxReported {
		t.Fatalf("in-flight reached %d, above the largest capacity reported (%d)", p, maxReported)
	}
	for _, b := range bal.Snapshot().Backends() {
		if n := b.InFlight(); n != 0 {
			t.Fatalf("%s: %d in flight after every lease was released", b.ID, n)
		}
	}
	for range 2 { // a limit rises on the second report that shows the others gone
		for _, id := range []string{"a", "b"} {
			bal.Observe(Observation{ID: id, Ready: true, Checked: time.Now(), Load: &protocol.Load{InFlight: 0, Capacity: maxReported, At: time.Now()},
				Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}})
		}
	}
	f := &fleetFixture{bal: bal, app: app}
	got, ls := f.fill(t)
	release(ls)
	// Nothing in flight anywhere: the whole capacity, paced to ceil(12 / 2) = 6.
	if got["a"] != maxReported/2 || got["b"] != maxReported/2 {
		t.Fatalf("after the reports settled: leases %v, want %d on each", got, maxReported/2)
	}
}

// TestFleetPacing checks the paced rise over several reports: an instance alone on a backend,
// taking every slot its limit allows before each report, reaches the whole capacity in a few
// reports; instances that all see the same report and all claim what their limits allow at
// once never take more than what was free plus instances-1 (without pacing: instances x free).
func TestFleetPacing(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("alone: the limit reaches the capacity step by step", func(t *testing.T) {
		for _, tt := range []struct {
			capacity  int64
			instances int
			steps     []int64
		}{
			{8, 3, []int64{3, 5, 6, 7, 8}},
			{8, 2, []int64{4, 6, 7, 8}},
			{64, 3, []int64{22, 36, 46, 52, 56, 59, 61, 62, 63, 64}},
			{8, 1, []int64{8}},
		} {
			var mine int64
			var got []int64
			for range 20 {
				d := fleetLimit(fleetInput{Configured: tt.capacity, Instances: tt.instances, Now: t0, Interval: time.Second,
					Report: &Load{Load: protocol.Load{InFlight: mine, At: t0}, MineThen: mine}})
				got = append(got, d.Limit)
				if d.Paced != (d.Limit < tt.capacity) {
					t.Errorf("capacity %d, %d instances, mine %d: paced %v with limit %d", tt.capacity, tt.instances, mine, d.Paced, d.Limit)
				}
				if d.Limit == tt.capacity {
					break
				}
				mine = d.Limit // busy: it takes every slot it may
			}
			if !slices.Equal(got, tt.steps) {
				t.Errorf("capacity %d, %d instances: limits %v, want %v", tt.capacity, tt.instances, got, tt.steps)
			}
		}
	})
	t.Run("claimers keeping the limits they had rise together by at most free + instances - 1", func(t *testing.T) {
		const n = 3
		eachSplit(9, func(capacity int64, mine [n]int64) {
			inFlight := mine[0] + mine[1] + mine[2]
			free := capacity - inFlight
			for p0 := int64(0); p0 <= capacity; p0++ {
				for p1 := int64(0); p1 <= capacity; p1++ {
					for p2 := int64(0); p2 <= capacity; p2++ {
						had := [n]int64{p0, p1, p2}
						var rose int64
						for i, m := range mine {
							d := fleetLimit(fleetInput{Configured: capacity, Instances: n, Now: t0, Interval: time.Second,
								Report: &Load{Load: protocol.Load{InFlight: inFlight, At: t0}, MineThen: m, LimitThen: had[i], PrevAt: t0.Add(-25 * time.Millisecond)}})
							// Not full (no slot given back) and the others leave at least what it had: kept.
							keep := inFlight < capacity && capacity-(inFlight-m) >= had[i]
							if d.Limit > capacity || (keep && d.Limit < had[i]) {
								t.Fatalf("capacity %d, mine %d, had %d: limit %d", capacity, m, had[i], d.Limit)
							}
							rose += max(0, d.Limit-max(m, had[i]))
						}
						if rose > free+n-1 {
							t.Fatalf("capacity %d, in flight %v, limits %v: the three rise by %d, with %d free", capacity, mine, had, rose, free)
						}
					}
				}
			}
		})
	})
	t.Run("claimers on one report take at most free + instances - 1", func(t *testing.T) {
		const n = 3
		eachSplit(16, func(capacity int64, mine [n]int64) {
			inFlight := mine[0] + mine[1] + mine[2]
			free := capacity - inFlight
			var claimed int64
			for _, m := range mine {
				d := fleetLimit(fleetInput{Configured: capacity, Instances: n, Now: t0, Interval: time.Second,
					Report: &Load{Load: protocol.Load{InFlight: inFlight, At: t0}, MineThen: m}})
				claimed += max(0, d.Limit-m)
			}
			if claimed > free+n-1 || (free%n == 0 && claimed > free) {
				t.Fatalf("capacity %d, in flight %v: the three claim %d, with %d free", capacity, mine, claimed, free)
			}
		})
	})
}

// eachSplit calls f for every capacity from 1 to maxCapacity and every way three instances
// can hold in-flight requests on a backend of that capacity (together at most the capacity).
func eachSplit(maxCapacity int64, f func(capacity int64, mine [3]int64)) {
	for capacity := int64(1); capacity <= maxCapacity; capacity++ {
		for m0 := int64(0); m0 <= capacity; m0++ {
			for m1 := int64(0); m0+m1 <= capacity; m1++ {
				for m2 := int64(0); m0+m1+m2 <= capacity; m2++ {
					f(capacity, [3]int64{m0, m1, m2})
				}
			}
		}
	}
}
