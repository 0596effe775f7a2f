package balancer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// Regression: 250 requests in flight on a backend of capacity 300, removed by a reload and added
// back by the next, then 300 more: the backend got 550 at once, because the re-added backend
// started a new count. Leases are counted per address, whatever configuration took them.
func TestLeasesCountedPerAddressAcrossReloads(t *testing.T) {
	const addr = "127.0.0.1:20001"
	other := configs.Backend{ID: "other", Address: "127.0.0.1:20002", Pool: "elsewhere", Capacity: 5}
	be := func(id string, capacity int) []configs.Backend {
		return []configs.Backend{{ID: id, Address: addr, Capacity: capacity}, other}
	}
	cases := []struct {
		name     string
		capacity int                 // of backend "a" at addr, where the leases are taken
		held     int                 // leases taken before the reloads
		reloads  [][]configs.Backend // applied in order
		id       string              // the backend's id at addr after the reloads
		final    int                 // its capacity after the reloads
	}{
		{name: "unchanged", capacity: 300, held: 250, reloads: [][]configs.Backend{be("a", 300)}, id: "a", final: 300},
		{name: "capacity lowered below the leases held", capacity: 300, held: 250, reloads: [][]configs.Backend{be("a", 200)}, id: "a", final: 200},
		{name: "capacity raised", capacity: 3, held: 3, reloads: [][]configs.Backend{be("a", 5)}, id: "a", final: 5},
		{name: "id renamed", capacity: 300, held: 250, reloads: [][]configs.Backend{be("b", 300)}, id: "b", final: 300},
		{name: "removed, then added back (the measured case)", capacity: 300, held: 250,
			reloads: [][]configs.Backend{{other}, be("a", 300)}, id: "a", final: 300},
		{name: "removed, then added back under another id and capacity", capacity: 10, held: 8,
			reloads: [][]configs.Backend{{other}, {other}, be("c", 9)}, id: "c", final: 9},
		{name: "capacity 1 removed and added back", capacity: 1, held: 1,
			reloads: [][]configs.Backend{{other}, be("a", 1)}, id: "a", final: 1},
	}
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bal := newTestBalancer(t, configtest.New(apps, be("a", tc.capacity)), nil)
			markReady(bal, []string{"a", "other"})
			held := make([]Lease, 0, tc.held)
			for range tc.held {
				s := bal.Snapshot()
				l, err := bal.Acquire(s, s.AppByName("www"), nil)
				if err != nil {
					t.Fatalf("lease %d: %v", len(held), err)
				}
				held = append(held, l)
			}
			for _, bs := range tc.reloads {
				reloadReady(bal, apps, bs)
				checkHints(t, bal.Snapshot())
			}
			s := bal.Snapshot()
			rt := s.byID[tc.id].b
			if got := rt.InFlight(); got != int64(tc.held) {
				t.Fatalf("%s in flight %d after the reloads, want the %d held before them", tc.id, got, tc.held)
			}
			// Take what is left, then one more: the last must be refused.
			more := acquireAll(t, bal)
			if want := max(0, tc.final-tc.held); len(more) != want {
				t.Fatalf("took %d more leases on capacity %d with %d held, want %d", len(more), tc.final, tc.held, want)
			}
			checkHints(t, bal.Snapshot())
			// Releasing the old leases frees slots in the same count, and the block hints the
			// refused picks lowered are raised again: exactly capacity can be held once more.
			for _, l := range held {
				l.Release()
			}
			for _, l := range more {
				l.Release()
			}
			if got := rt.InFlight(); got != 0 {
				t.Fatalf("in flight %d after every release, want 0", got)
			}
			checkHints(t, bal.Snapshot())
			again := acquireAll(t, bal)
			if len(again) != tc.final {
				t.Fatalf("after the releases took %d leases, want capacity %d", len(again), tc.final)
			}
			for _, l := range again {
				l.Release()
			}
		})
	}
}

// acquireAll takes leases for app www until it is refused, and returns them.
func acquireAll(t *testing.T, bal *Balancer) []Lease {
	t.Helper()
	var out []Lease
	for {
		s := bal.Snapshot()
		l, err := bal.Acquire(s, s.AppByName("www"), nil)
		if errors.Is(err, ErrNoCandidate) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
		if len(out) > 10000 {
			t.Fatal("no refusal after 10000 leases")
		}
	}
}

// TestSlotsOfRemovedAddressesAreForgotten: the count of an address that the configuration no
// longer lists is kept while leases are held on it and dropped by the next reload after they
// are all released; a request still holding the snapshot from before that reload cannot lease
// the forgotten count, so an address added back later never starts below what is in flight.
func TestSlotsOfRemovedAddressesAreForgotten(t *testing.T) {
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	both := []configs.Backend{{ID: "a", Address: "127.0.0.1:20001", Capacity: 2}, {ID: "b", Address: "127.0.0.1:20002", Capacity: 2}}
	onlyB := both[1:]
	bal := newTestBalancer(t, configtest.New(apps, both), nil)
	markReady(bal, []string{"a", "b"})
	s := bal.Snapshot()
	var tried Tried
	tried.Add(s.byID["b"].b)
	l, err := bal.Acquire(s, s.AppByName("www"), &tried)
	if err != nil || l.Backend.ID != "a" {
		t.Fatalf("lease on a: %v %v", l.Backend, err)
	}
	bal.Update(configtest.New(apps, onlyB))
	bal.Update(configtest.New(apps, onlyB))
	if len(bal.slots) != 2 {
		t.Fatalf("%d counts kept, want 2 (a still holds a lease)", len(bal.slots))
	}
	l.Release()
	bal.Update(configtest.New(apps, onlyB))
	if len(bal.slots) != 1 {
		t.Fatalf("%d counts kept after a's last release and a reload, want 1", len(bal.slots))
	}
	// s is the snapshot from before a was removed: a is forgotten, so it is full there.
	if l, err := bal.Acquire(s, s.AppByName("www"), &tried); err == nil {
		t.Fatalf("leased %s through a snapshot from before its address was forgotten", l.Backend.ID)
	}
	bal.Update(configtest.New(apps, both))
	markReady(bal, []string{"a"})
	if got := bal.Snapshot().byID["a"].b.InFlight(); got != 0 {
		t.Fatalf("a added back with %d in flight, want 0", got)
	}
}

// TestLeasesBoundedPerAddressUnderRandomReloads has workers take and release leases while
// reloads rename, remove, re-add and resize the backends of fixed addresses. The workers count
// their own leases per address (after taking, before releasing), and that count never exceeds
// the largest capacity the address was ever given.
func TestLeasesBoundedPerAddressUnderRandomReloads(t *testing.T) {
	const nAddrs = 4
	rng := rand.New(rand.NewPCG(3, 4))
	var maxCap, own, peak [nAddrs]atomic.Int64
	addrIndex := map[string]int{}
	for i := range nAddrs {
		addrIndex[fmt.Sprintf("127.0.0.1:%d", 21000+i)] = i
	}
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	mkCfg := func() (*configs.Config, []string) {
		var bs []configs.Backend
		var ids []string
		for i := range nAddrs {
			if rng.IntN(5) == 0 {
				continue // removed by this reload
			}
			c := 1 + rng.IntN(3)
			raiseTo(&maxCap[i], int64(c))
			id := fmt.Sprintf("%c%d", "abc"[rng.IntN(3)], i) // renamed now and then
			bs = append(bs, configs.Backend{ID: id, Address: fmt.Sprintf("127.0.0.1:%d", 21000+i), Capacity: c})
			ids = append(ids, id)
		}
		return configtest.New(apps, bs), ids
	}
	cfg, ids := mkCfg()
	bal := newTestBalancer(t, cfg, nil)
	markReady(bal, ids)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var taken atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []Lease
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, l := range held {
						own[addrIndex[l.Backend.Address]].Add(-1)
						l.Release()
					}
					return
				default:
				}
				if len(held) > 0 && (i+w)%3 == 0 {
					l := held[len(held)-1]
					held = held[:len(held)-1]
					own[addrIndex[l.Backend.Address]].Add(-1)
					l.Release()
					continue
				}
				s := bal.Snapshot()
				l, err := bal.Acquire(s, s.AppByName("www"), nil)
				if err != nil {
					continue
				}
				taken.Add(1)
				k := addrIndex[l.Backend.Address]
				n := own[k].Add(1)
				if n > maxCap[k].Load() {
					t.Errorf("%s: %d leases held, capacity never above %d", l.Backend.Address, n, maxCap[k].Load())
				}
				raiseTo(&peak[k], n)
				held = append(held, l)
			}
		}()
	}
	for round := 0; round < 300 || (taken.Load() < 5000 && round < 100000); round++ {
		next, ids := mkCfg()
		bal.Update(next)
		markReady(bal, ids)
	}
	close(stop)
	wg.Wait()
	if taken.Load() == 0 {
		t.Fatal("no lease was taken: the test exercised nothing")
	}
	for addr, k := range addrIndex {
		if s := bal.slots[addr]; s != nil && s.count() != 0 {
			t.Errorf("%s: %d in flight after every release", addr, s.count())
		}
		t.Logf("%s: peak %d, largest capacity %d", addr, peak[k].Load(), maxCap[k].Load())
	}
}

// TestHintsHoldAcrossRenamesAndReadding runs random leases, releases and reloads that rename,
// remove, re-add and resize backends (sequentially, so every hint can be checked after every
// step): each block hint of the current snapshot keeps bounding its members' spare, with
// releases of leases taken under older configurations raising the current hints. Once every
// lease is back, the whole capacity can be leased again.
func TestHintsHoldAcrossRenamesAndReadding(t *testing.T) {
	const nAddrs = 70 // three hint blocks
	rng := rand.New(rand.NewPCG(5, 6))
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	mkCfg := func() (*configs.Config, []string, int) {
		var bs []configs.Backend
		var ids []string
		total := 0
		for i := range nAddrs {
			if rng.IntN(6) == 0 {
				continue
			}
			c := 1 + rng.IntN(4)
			id := fmt.Sprintf("%c%02d", "xyz"[rng.IntN(3)], i)
			bs = append(bs, configs.Backend{ID: id, Address: fmt.Sprintf("127.0.0.1:%d", 22000+i), Capacity: c})
			ids = append(ids, id)
			total += c
		}
		return configtest.New(apps, bs), ids, total
	}
	cfg, ids, total := mkCfg()
	bal := newTestBalancer(t, cfg, nil)
	markReady(bal, ids)
	var held []Lease
	for step := 0; step < 2000; step++ {
		switch op := rng.IntN(40); { // more takes than releases: the pool runs full, picks are refused
		case op < 24:
			s := bal.Snapshot()
			if l, err := bal.Acquire(s, s.AppByName("www"), nil); err == nil {
				held = append(held, l)
			}
		case op < 39:
			if len(held) > 0 {
				i := rng.IntN(len(held))
				held[i].Release()
				held[i] = held[len(held)-1]
				held = held[:len(held)-1]
			}
		default:
			cfg, ids, total = mkCfg()
			bal.Update(cfg)
			markReady(bal, ids)
		}
		checkHints(t, bal.Snapshot())
	}
	for _, l := range held {
		l.Release()
	}
	checkHints(t, bal.Snapshot())
	again := acquireAll(t, bal)
	if len(again) != total {
		t.Fatalf("leased %d after every release, want the whole capacity %d", len(again), total)
	}
	for _, l := range again {
		l.Release()
	}
}

// TestLeaseReleaseIsIdempotent: releasing a Lease again, or releasing a copy of it as well,
// never takes the address's in-flight count below 0, so the backend is never given more than
// its capacity afterwards; leases still held are counted until they are released.
func TestLeaseReleaseIsIdempotent(t *testing.T) {
	cases := []struct {
		name    string
		release func(l Lease) // releases l (and copies of it) some number of times
		stray   int64         // the releases that found nothing in flight
	}{
		{name: "once", release: func(l Lease) { l.Release() }},
		{name: "the same variable twice", release: func(l Lease) { l.Release(); l.Release() }},
		{name: "a copy after the original", release: func(l Lease) { c := l; l.Release(); c.Release() }, stray: 1},
		{name: "the original after a copy", release: func(l Lease) { c := l; c.Release(); l.Release() }, stray: 1},
		{name: "eight copies at once", stray: 7, release: func(l Lease) {
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func(c Lease) { defer wg.Done(); c.Release() }(l)
			}
			wg.Wait()
		}},
	}
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bal := newTestBalancer(t, configtest.New(apps, []configs.Backend{{ID: "a", Capacity: 3}}), nil)
			markReady(bal, []string{"a"})
			s := bal.Snapshot()
			b := s.byID["a"].b
			l, err := bal.Acquire(s, s.AppByName("www"), nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.release(l)
			if got := b.slot.inFlight.Load(); got != 0 {
				t.Fatalf("in flight %d after the releases, want 0", got)
			}
			if got := b.StrayReleases(); got != tc.stray {
				t.Fatalf("%d stray releases, want %d", got, tc.stray)
			}
			held := acquireAll(t, bal)
			if len(held) != 3 {
				t.Fatalf("%d leases taken after the releases on capacity 3, want 3", len(held))
			}
			if got := b.InFlight(); got != 3 {
				t.Fatalf("in flight %d with 3 leases held, want 3", got)
			}
			for i := range held {
				held[i].Release()
				held[i].Release()
			}
			if got := b.slot.inFlight.Load(); got != 0 {
				t.Fatalf("in flight %d after releasing every lease twice, want 0", got)
			}
			if got := b.StrayReleases(); got != tc.stray {
				t.Fatalf("%d stray releases after releasing each lease variable twice, want still %d", got, tc.stray)
			}
		})
	}
}

// TestSlotFillsACacheLine: each address's count has a cache line of its own, so the leases of
// one backend do not slow down the picks and leases of the next.
func TestSlotFillsACacheLine(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got != cacheLine {
		t.Fatalf("slot is %d bytes, want %d", got, cacheLine)
	}
	if got := unsafe.Sizeof(rotation{}); got != cacheLine {
		t.Fatalf("rotation is %d bytes, want %d", got, cacheLine)
	}
	// Slots are allocated one by one as addresses appear; with the padding no two share a line.
	cfg := configtest.New(nil, []configs.Backend{{ID: "a", Address: "127.0.0.1:20001"}, {ID: "b", Address: "127.0.0.1:20002"}, {ID: "c", Address: "127.0.0.1:20003"}})
	reg := map[string]*slot{}
	syncSlots(reg, cfg, nil)
	lines := map[uintptr]bool{}
	for _, s := range reg {
		start, end := uintptr(unsafe.Pointer(&s.inFlight))/cacheLine, (uintptr(unsafe.Pointer(s))+unsafe.Sizeof(*s)-1)/cacheLine
		if start != end {
			t.Errorf("a slot spans cache lines %d to %d", start, end)
		}
		if lines[start] {
			t.Errorf("two slots share cache line %d", start)
		}
		lines[start] = true
	}
}
