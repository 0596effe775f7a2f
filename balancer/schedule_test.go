package balancer

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

func TestAcquireResolution(t *testing.T) {
	acme := []configs.Backend{{ID: "a1", Owner: "acme"}, {ID: "a2", Owner: "acme"}}
	shared := []configs.Backend{{ID: "d1"}, {ID: "d2"}}
	canary := []configs.Backend{{ID: "c1", Pool: "canary"}}
	unassigned := []configs.Backend{{ID: "u1", Pool: "unassigned"}}
	all := func(groups ...[]configs.Backend) []configs.Backend {
		var out []configs.Backend
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}
	cases := []struct {
		name      string
		app       configs.App
		backends  []configs.Backend
		ready     []string
		overrides map[string]string
		wantPool  string   // pool served from; "" = ErrNoCandidate
		wantIn    []string // the backend must be one of these
		fallback  bool
	}{
		{
			// Regression: the node-pool design's production incident of 2026-09-13, where every
			// app matched zero nodes while all nodes looked healthy.
			name:     "owner without explicit binding is served from pool-owner, not default (incident 2026-09-13)",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme"},
			backends: all(acme, shared), ready: []string{"a1", "a2", "d1", "d2"},
			wantPool: "pool-acme", wantIn: []string{"a1", "a2"},
		},
		{
			name:     "explicit pool is served from that pool",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Pool: "pool-acme"},
			backends: all(acme, shared), ready: []string{"a1", "a2", "d1", "d2"},
			wantPool: "pool-acme", wantIn: []string{"a1", "a2"},
		},
		{
			name:     "no binding resolves to default",
			app:      configs.App{Name: "www", Hosts: []string{"*"}},
			backends: all(acme, shared), ready: []string{"a1", "a2", "d1", "d2"},
			wantPool: "default", wantIn: []string{"d1", "d2"},
		},
		{
			name:     "explicit pool is fail-closed by default",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Pool: "pool-acme"},
			backends: all(acme, shared), ready: []string{"d1", "d2"},
			wantPool: "",
		},
		{
			name:     "owner falls back to default by default",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme"},
			backends: all(acme, shared), ready: []string{"d1"},
			wantPool: "default", wantIn: []string{"d1"}, fallback: true,
		},
		{
			name:     "owner with explicit false is strict",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
			backends: all(acme, shared), ready: []string{"d1"},
			wantPool: "",
		},
		{
			name:     "explicit pool with fallback allowed falls back",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Pool: "pool-acme", AllowFallbackToDefault: boolp(true)},
			backends: all(acme, shared), ready: []string{"d2"},
			wantPool: "default", wantIn: []string{"d2"}, fallback: true,
		},
		{
			name:     "backends existing in the pool is not the same as a candidate",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
			backends: all(acme, shared), ready: []string{},
			wantPool: "",
		},
		{
			name:     "canary pool is never scheduled by an app that does not resolve to it",
			app:      configs.App{Name: "www", Hosts: []string{"*"}},
			backends: all(canary), ready: []string{"c1"},
			wantPool: "",
		},
		{
			name:     "canary pool is scheduled once an app resolves to it",
			app:      configs.App{Name: "beta", Hosts: []string{"*"}, Pool: "canary"},
			backends: all(canary, shared), ready: []string{"c1", "d1"},
			wantPool: "canary", wantIn: []string{"c1"},
		},
		{
			name:     "unassigned is never scheduled, even by fallback",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme"},
			backends: all(unassigned), ready: []string{"u1"},
			wantPool: "",
		},
		{
			name:     "admin override beats config",
			app:      configs.App{Name: "shop", Hosts: []string{"*"}, Owner: "acme", AllowFallbackToDefault: boolp(false)},
			backends: all(acme, shared), ready: []string{"a1", "a2", "d1", "d2"},
			overrides: map[string]string{"a1": "unassigned", "a2": "unassigned", "d1": "pool-acme"},
			wantPool:  "pool-acme", wantIn: []string{"d1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBalancer(t, configtest.New([]configs.App{tc.app}, tc.backends), tc.overrides)
			markReady(b, tc.ready)
			s := b.Snapshot()
			app := s.AppByName(tc.app.Name)
			lease, err := b.Acquire(s, app, nil)
			if tc.wantPool == "" {
				if !errors.Is(err, ErrNoCandidate) {
					t.Fatalf("got lease on %v (pool %s), want ErrNoCandidate", lease.Backend, lease.Pool)
				}
				if got := testutil.ToFloat64(app.counters.exhausted); got != 0 {
					t.Fatalf("pool_exhausted_total = %v after Acquire, want 0 (the proxy reports it)", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			defer lease.Release()
			if lease.Pool != tc.wantPool || lease.Fallback != tc.fallback {
				t.Fatalf("served from %s (fallback %v), want %s (fallback %v)", lease.Pool, lease.Fallback, tc.wantPool, tc.fallback)
			}
			if !contains(tc.wantIn, lease.Backend.ID) {
				t.Fatalf("backend %s, want one of %v", lease.Backend.ID, tc.wantIn)
			}
			if tc.fallback && testutil.ToFloat64(app.counters.fallback) != 1 {
				t.Fatal("pool_fallback_total not counted")
			}
		})
	}
}

func TestBackendCannotMoveItself(t *testing.T) {
	// A backend's answer names services, never pools: reporting a service called like another
	// pool, or "default", changes nothing about where it is scheduled.
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}},
		[]configs.Backend{{ID: "x", Pool: "unassigned"}})
	cfg.Services["default"] = configs.Service{WarningScope: configs.ScopeVersion}
	cfg.Services["pool-acme"] = configs.Service{WarningScope: configs.ScopeVersion}
	b := newTestBalancer(t, cfg, nil)
	b.Observe(Observation{ID: "x", Ready: true, Reports: []protocol.Report{
		{Service: "web", Status: protocol.Serving}, {Service: "default", Status: protocol.Serving}, {Service: "pool-acme", Status: protocol.Serving},
	}})
	if pool, source, _ := b.Snapshot().PoolOf("x"); pool != "unassigned" || source != configs.PoolSourceConfig {
		t.Fatalf("pool %s (%s), want unassigned (config)", pool, source)
	}
	if _, err := b.Acquire(b.Snapshot(), b.Snapshot().AppByName("www"), nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("backend in unassigned was scheduled: %v", err)
	}
}

func TestRanking(t *testing.T) {
	type hold struct {
		id string
		n  int
	}
	cases := []struct {
		name     string
		tie      string
		caps     map[string]int
		leaving  []string
		notReady []string
		held     []hold
		want     []string // successive picks (each lease kept)
	}{
		{name: "id tie-break takes the lowest id at equal spare", tie: "id",
			caps: map[string]int{"b1": 2, "b2": 2, "b3": 2}, want: []string{"b1", "b2", "b3", "b1"}},
		{name: "most spare capacity first", tie: "id",
			caps: map[string]int{"b1": 1, "b2": 4, "b3": 2}, want: []string{"b2", "b2", "b2", "b3"}},
		{name: "in-flight reduces spare", tie: "id",
			caps: map[string]int{"b1": 5, "b2": 5}, held: []hold{{"b1", 3}}, want: []string{"b2", "b2", "b2", "b1"}},
		{name: "serving before leaving even with less spare", tie: "id",
			caps: map[string]int{"b1": 100, "b2": 1}, leaving: []string{"b1"}, want: []string{"b2", "b1", "b1"}},
		{name: "not ready is skipped", tie: "id",
			caps: map[string]int{"b1": 5, "b2": 5}, notReady: []string{"b1"}, want: []string{"b2", "b2"}},
		{name: "full backends are skipped", tie: "id",
			caps: map[string]int{"b1": 1, "b2": 1}, want: []string{"b1", "b2", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bs []configs.Backend
			var ids []string
			for _, id := range []string{"b1", "b2", "b3"} {
				if c, ok := tc.caps[id]; ok {
					bs = append(bs, configs.Backend{ID: id, Capacity: c})
					if !contains(tc.notReady, id) {
						ids = append(ids, id)
					}
				}
			}
			cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, bs)
			cfg.Proxy.TieBreak = tc.tie
			b := newTestBalancer(t, cfg, nil)
			markReady(b, ids, tc.leaving...)
			s := b.Snapshot()
			for _, h := range tc.held {
				for i := 0; i < h.n; i++ {
					s.byID[h.id].slot.inFlight.Add(1)
				}
			}
			app := s.AppByName("www")
			for i, want := range tc.want {
				l, err := b.Acquire(s, app, nil)
				got := ""
				if err == nil {
					got = l.Backend.ID
				}
				if got != want {
					t.Fatalf("pick %d: got %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestRotateSharesEqualSpare(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}},
		[]configs.Backend{{ID: "b1"}, {ID: "b2"}, {ID: "b3"}, {ID: "b4"}})
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"b1", "b2", "b3", "b4"})
	s := b.Snapshot()
	counts := map[string]int{}
	for i := 0; i < 400; i++ {
		l, err := b.Acquire(s, s.AppByName("www"), nil)
		if err != nil {
			t.Fatal(err)
		}
		counts[l.Backend.ID]++
		l.Release()
	}
	for id, n := range counts {
		if n != 100 {
			t.Fatalf("rotate split %v: %s got %d, want 100 each", counts, id, n)
		}
	}
	if len(counts) != 4 {
		t.Fatalf("rotate used %v, want all 4 backends", counts)
	}
}

func TestTriedIsSkipped(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}, {ID: "b2"}})
	cfg.Proxy.TieBreak = configs.TieBreakID
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"b1", "b2"})
	s := b.Snapshot()
	var tried Tried
	l, _ := b.Acquire(s, s.AppByName("www"), &tried)
	tried.Add(l.Backend)
	l.Release()
	l2, err := b.Acquire(s, s.AppByName("www"), &tried)
	if err != nil || l2.Backend == l.Backend {
		t.Fatalf("retry picked %v (%v), want the other backend", l2.Backend, err)
	}
	tried.Add(l2.Backend)
	l2.Release()
	if _, err := b.Acquire(s, s.AppByName("www"), &tried); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("all tried: got %v, want ErrNoCandidate", err)
	}
	// Regression: a retry that finds no other candidate is a failed forward (502), not an
	// exhausted pool: it must not count or alarm. Acquire counts no exhaustion at all; the proxy
	// reports one only for a first try or after refusals as full.
	if got := testutil.ToFloat64(s.AppByName("www").counters.exhausted); got != 0 {
		t.Fatalf("a retry without candidates counted %v pool exhaustions, want 0", got)
	}
}

func TestEjectAfterFailedForwards(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}})
	cfg.Proxy.EjectAfter = 2
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"b1"})
	s := b.Snapshot()
	app := s.AppByName("www")
	for i := 0; i < 2; i++ {
		l, err := b.Acquire(s, app, nil)
		if err != nil {
			t.Fatalf("forward %d: %v", i, err)
		}
		b.Report(Result{Outcome: Failed, App: app, Lease: l, Reason: ErrorReset})
		l.Release()
	}
	if _, err := b.Acquire(s, app, nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("after 2 failures: %v, want ejected", err)
	}
	markReady(b, []string{"b1"}) // the next good check readmits it
	if l, err := b.Acquire(b.Snapshot(), app, nil); err != nil {
		t.Fatalf("after a good check: %v", err)
	} else {
		l.Release()
	}
}

func TestSlowStartRamps(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Capacity: 100}})
	cfg.Proxy.SlowStart = 10 * time.Second
	now := time.Unix(1000, 0)
	b, err := New(Options{Config: cfg, Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	obs := func(ready bool) {
		b.Observe(Observation{ID: "b1", Ready: ready, Reports: []protocol.Report{{Service: "web", Status: protocol.Serving}}, Checked: now})
	}
	obs(true) // first readiness: no ramp
	m := b.Snapshot().byID["b1"]
	if got := b.Snapshot().limit(m, m.b.Health(), now); got != 100 {
		t.Fatalf("first ready: limit %d, want 100", got)
	}
	obs(false)
	obs(true) // back after being down: ramps
	// Regression: a backend whose first check failed got full capacity when it became ready.
	b2 := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Capacity: 100}})
	b2.Proxy.SlowStart = 10 * time.Second
	late, err := New(Options{Config: b2, Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	late.Observe(Observation{ID: "b1", Ready: false, Reason: "connection refused", Checked: now})
	late.Observe(Observation{ID: "b1", Ready: true, Reports: []protocol.Report{{Service: "web", Status: protocol.Serving}}, Checked: now})
	if lm := late.Snapshot().byID["b1"]; late.Snapshot().limit(lm, lm.b.Health(), now) != 10 {
		t.Fatalf("down at its first check, then ready: limit %d, want 10 (slow start)", late.Snapshot().limit(lm, lm.b.Health(), now))
	}
	cases := []struct {
		name  string
		after time.Duration
		want  int64
	}{
		{"just ready: 10%", 0, 10},
		{"half way", 5 * time.Second, 55},
		{"done", 10 * time.Second, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := b.Snapshot()
			m := s.byID["b1"]
			if got := s.limit(m, m.b.Health(), now.Add(tc.after)); got != tc.want {
				t.Fatalf("limit %d, want %d", got, tc.want)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestUndeclaredServicesAreDroppedAndCounted(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}})
	b := newTestBalancer(t, cfg, nil)
	for i := 0; i < 2; i++ {
		b.Observe(Observation{ID: "b1", Ready: true, Reports: []protocol.Report{
			{Service: "web", Status: protocol.Serving}, {Service: "mystery", Status: protocol.Serving},
		}})
	}
	h := b.Snapshot().byID["b1"].b.Health()
	if !h.Ready || len(h.Reports) != 1 || h.Reports[0].Service != "web" || len(h.Ignored) != 1 || h.Ignored[0] != "mystery" {
		t.Fatalf("health %+v: want ready for web with mystery ignored", h)
	}
	if got := testutil.ToFloat64(b.metrics.ignored.WithLabelValues("b1")); got != 2 {
		t.Fatalf("pollbal_reports_ignored_total = %v, want 2 (one line per check)", got)
	}
	if l, err := b.Acquire(b.Snapshot(), b.Snapshot().AppByName("www"), nil); err != nil {
		t.Fatalf("the backend must stay a candidate for the declared service: %v", err)
	} else {
		l.Release()
	}
}

// Regression: during a reload that changed a backend's address, a check of the old address
// that finished late was applied to the backend at its new address.
func TestObservationForAReplacedAddressIsDropped(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: "127.0.0.1:10001"}})
	b := newTestBalancer(t, cfg, nil)
	b.Observe(Observation{ID: "b1", Address: "127.0.0.1:19999", Ready: true, Reports: []protocol.Report{{Service: "web", Status: protocol.Serving}}})
	if b.Snapshot().byID["b1"].b.Health().Ready {
		t.Fatal("a result for another address made the backend ready")
	}
	b.Observe(Observation{ID: "b1", Address: "127.0.0.1:10001", Ready: true, Reports: []protocol.Report{{Service: "web", Status: protocol.Serving}}})
	if !b.Snapshot().byID["b1"].b.Health().Ready {
		t.Fatal("a result for the backend's own address was dropped")
	}
}
