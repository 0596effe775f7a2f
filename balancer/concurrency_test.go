package balancer

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

// TestLeasesNeverOversubscribe has many goroutines take and release leases on backends with
// small random capacities while the configuration (capacities) and pool assignments (admin
// overrides) are reloaded underneath them. In-flight must never exceed the largest capacity a
// backend was ever given while a lease could be taken against it, and every count must return
// to zero.
func TestLeasesNeverOversubscribe(t *testing.T) {
	const nBackends = 6
	rng := rand.New(rand.NewPCG(1, 2))
	mkCfg := func() (*configs.Config, map[string]int) {
		var bs []configs.Backend
		caps := map[string]int{}
		for i := 0; i < nBackends; i++ {
			c := 1 + rng.IntN(3)
			id := fmt.Sprintf("b%d", i)
			caps[id] = c
			bs = append(bs, configs.Backend{ID: id, Capacity: c, Owner: []string{"acme", "beta"}[i%2]})
		}
		return configtest.New([]configs.App{
			{Name: "acme", Hosts: []string{"acme.test"}, Owner: "acme"},
			{Name: "beta", Hosts: []string{"beta.test"}, Owner: "beta"},
			{Name: "www", Hosts: []string{"*"}},
		}, bs), caps
	}
	cfg, caps := mkCfg()
	b := newTestBalancer(t, cfg, nil)
	ids := make([]string, nBackends)
	for i := range ids {
		ids[i] = fmt.Sprintf("b%d", i)
	}
	markReady(b, ids)

	// maxCap[id] only grows: the bound a lease taken at any time must respect.
	var maxCap [nBackends]atomic.Int64
	var peak [nBackends]atomic.Int64
	setCaps := func(caps map[string]int) {
		for i, id := range ids {
			raiseTo(&maxCap[i], int64(caps[id]))
		}
	}
	setCaps(caps)

	var acquired atomic.Int64
	apps := []string{"acme", "beta", "www"}
	stop := testproc.Workers(16, func(w, i int) bool {
		s := b.Snapshot()
		l, err := b.Acquire(s, s.AppByName(apps[(w+i)%3]), nil)
		if err != nil {
			return true
		}
		acquired.Add(1)
		idx := int(l.Backend.ID[1] - '0')
		n := l.Backend.InFlight()
		raiseTo(&peak[idx], n)
		if n > maxCap[idx].Load() {
			t.Errorf("%s: %d in flight, capacity never above %d", l.Backend.ID, n, maxCap[idx].Load())
		}
		l.Release()
		return true
	})
	pools := []string{"pool-acme", "pool-beta", "default", "unassigned"}
	// At least 200 rounds, and on until the workers have taken plenty of leases (they may not
	// have been scheduled at all during the first rounds), bounded in rounds.
	for round := 0; round < 200 || (acquired.Load() < 2000 && round < 200000); round++ {
		if round%2 == 0 {
			next, nextCaps := mkCfg()
			setCaps(nextCaps) // raise the bound before the new capacities can be used
			b.Update(next)
		} else {
			id := ids[rng.IntN(nBackends)]
			if err := b.SetOverride(id, pools[rng.IntN(len(pools))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	if acquired.Load() == 0 {
		t.Fatal("no lease was ever taken: the test exercised nothing")
	}
	for i, id := range ids {
		if n := b.Snapshot().byID[id].b.InFlight(); n != 0 {
			t.Errorf("%s: %d still in flight after every lease was released", id, n)
		}
		if peak[i].Load() == 0 {
			t.Logf("%s was never leased", id)
		}
	}
}

// TestLeasesExactUnderContention checks the strict bound with a fixed capacity: many goroutines
// hammer one backend of capacity 3, and no goroutine ever sees more than 3 in flight.
func TestLeasesExactUnderContention(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Capacity: 3}})
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"b1"})
	var wg sync.WaitGroup
	var peak atomic.Int64
	var taken, refused atomic.Int64
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := b.Snapshot()
			app := s.AppByName("www")
			for i := 0; i < 2000; i++ {
				l, err := b.Acquire(s, app, nil)
				if err != nil {
					refused.Add(1)
					continue
				}
				taken.Add(1)
				n := l.Backend.InFlight()
				raiseTo(&peak, n)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if peak.Load() > 3 {
		t.Fatalf("peak in flight %d > capacity 3", peak.Load())
	}
	if taken.Load() == 0 {
		t.Fatal("no lease taken")
	}
	if n := b.Snapshot().byID["b1"].b.InFlight(); n != 0 {
		t.Fatalf("%d in flight at the end", n)
	}
	t.Logf("taken %d, refused %d, peak %d", taken.Load(), refused.Load(), peak.Load())
}
