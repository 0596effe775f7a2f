package balancer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

// scaleConfig is a fleet of pools × perPool backends: backend i of pool p is owned by tp, and
// each pool has one app for "web" and, for the even pools, one for "api".
func scaleConfig(pools, perPool int) *configs.Config {
	var apps []configs.App
	var bs []configs.Backend
	for p := 0; p < pools; p++ {
		apps = append(apps, configs.App{Name: fmt.Sprintf("web%d", p), Hosts: []string{fmt.Sprintf("web%d.test", p)}, Owner: fmt.Sprintf("t%d", p)})
		if p%2 == 0 {
			apps = append(apps, configs.App{Name: fmt.Sprintf("api%d", p), Hosts: []string{fmt.Sprintf("api%d.test", p)}, Owner: fmt.Sprintf("t%d", p), Service: "api"})
		}
		for i := 0; i < perPool; i++ {
			bs = append(bs, configs.Backend{ID: fmt.Sprintf("p%03d-b%05d", p, i), Owner: fmt.Sprintf("t%d", p)})
		}
	}
	cfg := configtest.New(apps, bs)
	cfg.Services["api"] = configs.Service{WarningThreshold: 1, WarningScope: configs.ScopeVersion}
	return cfg
}

// work returns the balancer's candidate-set work so far.
func work(b *Balancer) setWork {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.setWork
}

// currentSets maps every list of s to its current set.
func currentSets(s *Snapshot) map[[2]string]*candSet {
	out := map[[2]string]*candSet{}
	for k, l := range s.lists {
		out[k] = l.current()
	}
	return out
}

// TestHealthChangeWorkStaysInItsPool holds a health change to the lists of its own pool that
// its group changes in: one new set per such list, made by reading at most one block of
// members, whatever the size of the pool or of the fleet; every other list keeps its set. A
// reload, by contrast, builds every list from all its pool's members (which shows the count
// sees a rebuild).
func TestHealthChangeWorkStaysInItsPool(t *testing.T) {
	web := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}
	both := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}, {Service: "api", Status: protocol.Serving, Version: "v1"}}
	leavingWeb := []protocol.Report{{Service: "web", Status: protocol.Leaving, Version: "v1"}, {Service: "api", Status: protocol.Serving, Version: "v1"}}
	changes := []struct {
		name     string
		obs      Observation // ID set per case
		wantSets int         // lists of pool t0 (web, api) whose set the change replaces
	}{
		{name: "not ready: leaves both lists", obs: Observation{Ready: false, Reason: "down"}, wantSets: 2},
		{name: "ready again, web only: joins one list", obs: Observation{Ready: true, Reports: web}, wantSets: 1},
		{name: "adds api: joins the other list", obs: Observation{Ready: true, Reports: both}, wantSets: 1},
		{name: "web serving to leaving: moves between two groups of one list", obs: Observation{Ready: true, Reports: leavingWeb}, wantSets: 1},
		{name: "same answer again: nothing to do", obs: Observation{Ready: true, Reports: leavingWeb}, wantSets: 0},
	}
	fleets := []struct{ pools, perPool int }{
		{pools: 2, perPool: 40},
		{pools: 100, perPool: 40}, // 50 times the fleet, the same pool
		{pools: 2, perPool: 4000}, // 100 times the pool
	}
	for _, f := range fleets {
		t.Run(fmt.Sprintf("%d pools of %d", f.pools, f.perPool), func(t *testing.T) {
			cfg := scaleConfig(f.pools, f.perPool)
			bal := newTestBalancer(t, cfg, nil)
			for _, cb := range cfg.Backends {
				bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: both, Checked: time.Now()})
			}
			s := bal.Snapshot()
			id := fmt.Sprintf("p000-b%05d", f.perPool/2)
			for _, c := range changes {
				before, sets := work(bal), currentSets(s)
				o := c.obs
				o.ID, o.Checked = id, time.Now()
				bal.Observe(o)
				after := work(bal)
				if got := after.sets - before.sets; got != c.wantSets {
					t.Errorf("%s: %d sets made, want %d", c.name, got, c.wantSets)
				}
				// Finding the place in one block (or leaving one) per set, once per group it
				// leaves or joins.
				if got, most := after.members-before.members, 2*c.wantSets*hintBlock; got > most {
					t.Errorf("%s: %d members read, want at most %d", c.name, got, most)
				}
				if bal.Snapshot() != s {
					t.Fatalf("%s: the snapshot was replaced", c.name)
				}
				for k, set := range currentSets(s) {
					if set != sets[k] && k[0] != "pool-t0" {
						t.Errorf("%s: list %v of another pool got a new set", c.name, k)
					}
				}
			}
			before := work(bal)
			bal.Update(scaleConfig(f.pools, f.perPool))
			after := work(bal)
			// web in every pool, api in every other one, and both in default, where the apps
			// fall back (no backend there).
			owned := f.pools + (f.pools+1)/2
			if got, want := after.sets-before.sets, owned+2; got != want {
				t.Errorf("reload: %d sets made, want %d (every list)", got, want)
			}
			if got, want := after.members-before.members, owned*f.perPool; got != want {
				t.Errorf("reload: %d members read, want %d (every list's pool)", got, want)
			}
		})
	}
}

// TestRegroupMatchesRebuild applies random check results, including leaving, not ready,
// undeclared services and capacities that differ, and after each one compares every list's
// set, made by moving members in and out, with the set a fresh build makes from the same
// health; and the hints every member's releases raise with the groups it is in.
func TestRegroupMatchesRebuild(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			cfg := scaleConfig(3, 80) // three blocks a pool, the last one partly filled
			for i := range cfg.Backends {
				if seed != 1 { // seed 1: one capacity, the uniform path
					cfg.Backends[i].Capacity = 1 + rng.IntN(6)
				}
			}
			cfg.Backends = append(cfg.Backends, configs.Backend{ID: "u1", Address: "127.0.0.1:9999", Capacity: 3, Pool: configs.PoolUnassigned})
			bal := newTestBalancer(t, cfg, nil)
			statuses := []protocol.Status{protocol.Serving, protocol.Leaving}
			for step := 0; step < 2000; step++ {
				cb := cfg.Backends[rng.IntN(len(cfg.Backends))]
				o := Observation{ID: cb.ID, Ready: rng.IntN(5) != 0, Checked: time.Now()}
				if !o.Ready {
					o.Reason = "down"
				}
				for _, svc := range []string{"web", "api", "other"} {
					if o.Ready && rng.IntN(3) != 0 {
						o.Reports = append(o.Reports, protocol.Report{Service: svc, Status: statuses[rng.IntN(2)]})
					}
				}
				bal.Observe(o)
				compareWithRebuild(t, bal.Snapshot(), step)
			}
		})
	}
}

func compareWithRebuild(t *testing.T, s *Snapshot, step int) {
	t.Helper()
	for k, l := range s.lists {
		got := l.current()
		fresh := newCandList(l.pool, l.service, l.pooled, &rotation{})
		want := fresh.current()
		for g := range got.groups {
			if a, b := ids(got.groups[g].members), ids(want.groups[g].members); !slices.Equal(a, b) {
				t.Fatalf("step %d: list %v group %d: %v, a rebuild has %v", step, k, g, a, b)
			}
			if !slices.Equal(got.groups[g].starts, want.groups[g].starts) {
				t.Fatalf("step %d: list %v group %d: block bounds %v, a rebuild has %v", step, k, g, got.groups[g].starts, want.groups[g].starts)
			}
		}
		if !slices.Equal(l.live.in, fresh.live.in) {
			t.Fatalf("step %d: list %v: groups by member %v, a rebuild has %v", step, k, l.live.in, fresh.live.in)
		}
		if got.maxCap != want.maxCap && len(want.groups[0].members)+len(want.groups[1].members) > 0 {
			t.Fatalf("step %d: list %v: largest capacity %d, a rebuild has %d", step, k, got.maxCap, want.maxCap)
		}
	}
	for _, m := range s.members {
		var want []*spareHint
		for _, l := range s.byPool[m.pool] {
			if g := l.live.in[m.pos]; g != groupNone {
				want = append(want, &l.live.hints[g][m.pos/hintBlock])
			}
		}
		var got []*spareHint
		if regs := m.slot.hints.Load(); regs != nil {
			for _, r := range *regs {
				got = append(got, r.hint)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: %s raises %d hints, its groups have %d", step, m.cfg.ID, len(got), len(want))
		}
	}
}

func ids(ms []*member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.cfg.ID
	}
	return out
}
