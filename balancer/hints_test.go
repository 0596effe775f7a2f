package balancer

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

// linearPick is the reference ranking: every member in rotation order from start, the first with
// the most spare wins, stopping at one whose spare equals the set's largest capacity.
func linearPick(s *Snapshot, set *candSet, ms []*member, start int, tried *Tried) *member {
	var best *member
	var bestSpare int64
	for i := range ms {
		m := ms[(start+i)%len(ms)]
		limit, ok := s.available(m, tried, time.Time{})
		if !ok {
			continue
		}
		spare := limit - m.slot.inFlight.Load()
		if spare <= 0 || spare <= bestSpare {
			continue
		}
		best, bestSpare = m, spare
		if spare >= set.maxCap {
			break
		}
	}
	return best
}

// checkHints fails unless every block hint of the snapshot's current candidate sets bounds the
// spare (capacity - in-flight) of each member of its block.
func checkHints(t *testing.T, s *Snapshot) {
	t.Helper()
	for key, l := range s.lists {
		set := l.current()
		for gi := range set.groups {
			g := &set.groups[gi]
			if len(g.hints) != len(l.live.hints[gi]) || (len(g.hints) > 0 && &g.hints[0] != &l.live.hints[gi][0]) {
				t.Fatalf("list %v group %d: the set's hints are not the list's", key, gi)
			}
			for k := range g.hints {
				for _, m := range g.block(k) {
					if m.pos/hintBlock != k {
						t.Fatalf("list %v group %d block %d holds %s at pool position %d", key, gi, k, m.cfg.ID, m.pos)
					}
					if spare, bound := m.capacity-m.slot.inFlight.Load(), g.hints[k].bound.Load(); spare > bound {
						t.Fatalf("list %v group %d block %d: %s has spare %d above the hint %d", key, gi, k, m.cfg.ID, spare, bound)
					}
				}
			}
		}
	}
}

// TestPickMatchesLinearScan runs random sequences of picks, leases, releases, ejections, health
// changes and reloads, and checks every block-hint pick against the reference linear scan (on the
// current snapshot and on a retired one) and every hint against the members it bounds.
func TestPickMatchesLinearScan(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		maxCap int
		tie    string
		seed   uint64
	}{
		{name: "rotate, 100 backends, small capacities", n: 100, maxCap: 4, tie: configs.TieBreakRotate, seed: 1},
		{name: "id, 100 backends, small capacities", n: 100, maxCap: 4, tie: configs.TieBreakID, seed: 2},
		{name: "rotate, 64 backends (whole blocks)", n: 64, maxCap: 8, tie: configs.TieBreakRotate, seed: 3},
		{name: "rotate, 33 backends (one member in the last block)", n: 33, maxCap: 3, tie: configs.TieBreakRotate, seed: 4},
		{name: "rotate, 300 backends, wide capacities", n: 300, maxCap: 50, tie: configs.TieBreakRotate, seed: 5},
		{name: "id, 300 backends, wide capacities", n: 300, maxCap: 50, tie: configs.TieBreakID, seed: 6},
		{name: "rotate, 5 backends (one block)", n: 5, maxCap: 3, tie: configs.TieBreakRotate, seed: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 99))
			ids := make([]string, tc.n)
			mkCfg := func() *configs.Config {
				bs := make([]configs.Backend, tc.n)
				for i := range bs {
					ids[i] = fmt.Sprintf("b%04d", i)
					bs[i] = configs.Backend{ID: ids[i], Capacity: 1 + rng.IntN(tc.maxCap)}
				}
				cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, bs)
				cfg.Proxy.TieBreak = tc.tie
				return cfg
			}
			bal := newTestBalancer(t, mkCfg(), nil)
			observe := func(id string) {
				o := Observation{ID: id, Ready: rng.IntN(8) != 0, Checked: time.Now()}
				if o.Ready {
					st := protocol.Serving
					if rng.IntN(4) == 0 {
						st = protocol.Leaving
					}
					o.Reports = []protocol.Report{{Service: "web", Status: st, Version: "v1"}}
				} else {
					o.Reason = "down"
				}
				bal.Observe(o)
			}
			for _, id := range ids {
				observe(id)
			}
			var held []*Backend
			for _, m := range bal.Snapshot().members {
				for k := rng.IntN(int(m.capacity) + 1); k > 0; k-- {
					if m.slot.tryAcquire(m.capacity) != 0 {
						held = append(held, m.b)
					}
				}
			}
			var retired *Snapshot
			picks := 0
			for step := 0; step < 4000; step++ {
				s := bal.Snapshot()
				switch op := rng.IntN(20); {
				case op < 9: // pick, and lease what was picked
					if retired != nil && rng.IntN(4) == 0 {
						s = retired
					}
					l := s.AppByName("www").primary
					set := l.current()
					gi := rng.IntN(2)
					g := &set.groups[gi]
					var tried Tried
					for k := rng.IntN(3); k > 0; k-- {
						tried.Add(s.members[rng.IntN(len(s.members))].b)
					}
					start := 0
					if n := len(g.members); !s.tieID && n > 1 {
						start = int((l.rot.n.Load() + 1) % uint32(n))
					}
					want := linearPick(s, set, g.members, start, &tried)
					got, limit := s.pick(l, set, gi, &tried, time.Time{})
					if got != want {
						t.Fatalf("step %d: pick got %v, linear scan %v", step, memberID(got), memberID(want))
					}
					picks++
					if got != nil {
						if got.slot.tryAcquire(limit) == 0 {
							t.Fatalf("step %d: picked %s but could not lease it", step, got.cfg.ID)
						}
						held = append(held, got.b)
					}
				case op < 16: // release a random lease
					if len(held) > 0 {
						i := rng.IntN(len(held))
						held[i].slot.release()
						held[i] = held[len(held)-1]
						held = held[:len(held)-1]
					}
				case op < 18: // eject or readmit: availability changes, spare does not
					m := s.members[rng.IntN(len(s.members))]
					m.b.ejected.Store(!m.b.ejected.Load())
				case op < 19: // a health change swaps the pool's candidate sets
					observe(ids[rng.IntN(len(ids))])
				default: // a reload with new capacities retires the whole snapshot
					retired = s
					bal.Update(mkCfg())
				}
				checkHints(t, bal.Snapshot())
			}
			for _, b := range held {
				b.slot.release()
			}
			checkHints(t, bal.Snapshot())
			if picks == 0 {
				t.Fatal("no pick was checked")
			}
		})
	}
}

func memberID(m *member) string {
	if m == nil {
		return "none"
	}
	return m.cfg.ID
}

// TestHintsHoldAfterConcurrentLeases has goroutines take and release leases on a busy pool; once
// they stop, every hint must again bound its block, or later picks would skip a better member.
func TestHintsHoldAfterConcurrentLeases(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		workers int
	}{
		{name: "200 backends, 8 workers", n: 200, workers: 8},
		{name: "40 backends, 4 workers", n: 40, workers: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bal, s, app := benchBalancer(t, tc.n)
			for i, m := range s.members {
				m.slot.inFlight.Add(int64(1 + i%900))
			}
			var wg sync.WaitGroup
			for w := 0; w < tc.workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					var held []Lease
					for i := 0; i < 3000; i++ {
						if len(held) > 0 && rng.IntN(2) == 0 {
							held[len(held)-1].Release()
							held = held[:len(held)-1]
							continue
						}
						l, err := bal.Acquire(s, app, nil)
						if err != nil {
							t.Error(err)
							return
						}
						held = append(held, l)
					}
					for _, l := range held {
						l.Release()
					}
				}(w)
			}
			wg.Wait()
			checkHints(t, s)
			for i, m := range s.members {
				if got := m.b.InFlight(); got != int64(1+i%900) {
					t.Fatalf("%s: in flight %d after all releases, want %d", m.cfg.ID, got, 1+i%900)
				}
			}
		})
	}
}

// TestTightenKeepsReleasesDuringTheScan replays a pick's tightening with a release, or a member
// joining the group, landing between the scan's read of the block and the compare-and-swap.
func TestTightenKeepsReleasesDuringTheScan(t *testing.T) {
	cases := []struct {
		name      string
		bound     int64 // the hint before the scan
		release   bool  // x releases one lease after the scan read it
		raiseSeen bool  // ... and its raise went through (bound was below its new spare)
		join      bool  // x is not in the set the scan read; it joins after the scan
		want      int64
	}{
		{name: "no release: lowered to what the scan saw", bound: 10, want: 5},
		{name: "release found the bound high enough: the re-read restores it", bound: 10, release: true, want: 6},
		{name: "release raised the bound: the swap fails", bound: 5, release: true, raiseSeen: true, want: 6},
		{name: "join found the bound high enough: the re-read of the current set restores it", bound: 10, join: true, want: 5},
		{name: "join raised the bound: the swap fails", bound: 4, join: true, want: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ms []*member
			for i, id := range []string{"x", "y"} {
				b := newBackend(id, "", &slot{})
				ms = append(ms, &member{b: b, slot: b.slot, capacity: 10, pos: i})
			}
			x, y := ms[0], ms[1]
			x.slot.inFlight.Store(5)
			y.slot.inFlight.Store(7)
			l := &candList{live: &candCell{hints: [2][]spareHint{make([]spareHint, 1), make([]spareHint, 1)}}}
			h := &l.live.hints[0][0]
			h.bound.Store(tc.bound)
			scanned := ms
			if tc.join {
				scanned = []*member{y}
			}
			l.live.cur.Store(&candSet{groups: [2]rankGroup{newRankGroup(scanned, 1, l.live.hints[0]), newRankGroup(nil, 1, l.live.hints[1])}})
			regs := []hintReg{{hint: h, capacity: 10}}
			x.slot.hints.Store(&regs)
			seen := h.bound.Load()
			top := int64(0)
			for _, m := range scanned { // the scan
				top = max(top, m.capacity-m.slot.inFlight.Load())
			}
			if tc.release {
				x.slot.release()
				if got := h.bound.Load(); (got != seen) != tc.raiseSeen {
					t.Fatalf("release left the bound at %d (seen %d)", got, seen)
				}
			}
			if tc.join { // what regroup does: publish, then raise to the capacity
				l.live.cur.Store(&candSet{groups: [2]rankGroup{newRankGroup(ms, 1, l.live.hints[0]), newRankGroup(nil, 1, l.live.hints[1])}})
				h.raise(x.capacity)
			}
			h.tighten(seen, top, l, 0, 0)
			if got := h.bound.Load(); got != tc.want {
				t.Fatalf("bound %d, want %d", got, tc.want)
			}
		})
	}
}
