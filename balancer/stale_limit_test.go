package balancer

import (
	"testing"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// Regression: a request keeps its snapshot for its retries, so a take can run on a snapshot that
// a reload replaced. The Backend a reload dropped (id renamed, address changed, removed) kept
// the limit of its last configuration, while its address's slot is shared with the Backend that
// replaced it: a retry through the old snapshot took slots up to the old capacity, past the new
// one (capacity 10 renamed to capacity 2 at the same address: 3 in flight).
func TestOldSnapshotCannotOversubscribeAfterReload(t *testing.T) {
	const addr = "127.0.0.1:20011"
	other := configs.Backend{ID: "other", Address: "127.0.0.1:20012", Pool: "elsewhere", Capacity: 5}
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	cases := []struct {
		name    string
		reloads [][]configs.Backend
		id      string // the backend at addr after the reloads
		final   int
	}{
		{name: "id renamed, capacity lowered", reloads: [][]configs.Backend{{{ID: "b", Address: addr, Capacity: 2}, other}}, id: "b", final: 2},
		{name: "removed, added back under another id", reloads: [][]configs.Backend{{other}, {{ID: "c", Address: addr, Capacity: 2}, other}}, id: "c", final: 2},
		{name: "removed", reloads: [][]configs.Backend{{other}}, final: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bal := newTestBalancer(t, configtest.New(apps, []configs.Backend{{ID: "a", Address: addr, Capacity: 10}, other}), nil)
			markReady(bal, []string{"a", "other"})
			old := bal.Snapshot()
			// One lease held on the address, so a removal keeps its slot.
			first, err := bal.Acquire(old, old.AppByName("www"), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, bs := range tc.reloads {
				reloadReady(bal, apps, bs)
			}
			held := []Lease{first}
			if tc.id != "" {
				held = append(held, acquireAll(t, bal)...)
			}
			slot := first.Backend.slot
			if got := slot.count(); got != int64(max(tc.final, 1)) {
				t.Fatalf("in flight %d on the address, want %d", got, max(tc.final, 1))
			}
			// A retry through the replaced snapshot: the address is full (or gone) now.
			if l, err := bal.Acquire(old, old.AppByName("www"), &Tried{}); err == nil {
				n := slot.count()
				l.Release()
				t.Fatalf("took a lease through the old snapshot on %s: %d in flight on an address of capacity %d",
					l.Backend.ID, n, tc.final)
			}
			for _, l := range held {
				l.Release()
			}
			if got := slot.count(); got != 0 {
				t.Fatalf("in flight %d after releasing every lease", got)
			}
		})
	}
}

// Regression: the slot registry was keyed by the address as spelled, so a reload that spelled
// the same socket differently (localhost for 127.0.0.1, a leading-zero port, upper case) started
// a new count next to the leases still held: 3 held on a backend of capacity 3 and 3 more taken.
func TestLeasesCountedAcrossAddressRespelling(t *testing.T) {
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	for _, respelled := range []string{"localhost:20021", "127.0.0.1:020021", "LOCALHOST:20021"} {
		t.Run(respelled, func(t *testing.T) {
			bal := newTestBalancer(t, configtest.New(apps, []configs.Backend{{ID: "a", Address: "127.0.0.1:20021", Capacity: 3}}), nil)
			markReady(bal, []string{"a"})
			held := acquireAll(t, bal)
			if len(held) != 3 {
				t.Fatalf("took %d leases on capacity 3", len(held))
			}
			bal.Update(configtest.New(apps, []configs.Backend{{ID: "a", Address: respelled, Capacity: 3}}))
			markReady(bal, []string{"a"})
			more := acquireAll(t, bal)
			if len(more) != 0 {
				t.Errorf("took %d more leases on the same socket of capacity 3 with 3 held", len(more))
			}
			for _, l := range append(held, more...) {
				l.Release()
			}
			if n := len(acquireAll(t, bal)); n != 3 {
				t.Errorf("took %d leases after releasing everything, want 3", n)
			}
		})
	}
}

// A first try through the snapshot a rename replaced still finds the renamed backend, under
// the new configuration's limit: it is served while the address has room and refused once the
// new capacity is reached.
func TestOldSnapshotUsesTheReplacingLimit(t *testing.T) {
	const addr = "127.0.0.1:20031"
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	bal := newTestBalancer(t, configtest.New(apps, []configs.Backend{{ID: "a", Address: addr, Capacity: 10}}), nil)
	markReady(bal, []string{"a"})
	old := bal.Snapshot()
	bal.Update(configtest.New(apps, []configs.Backend{{ID: "b", Address: addr, Capacity: 3}}))
	markReady(bal, []string{"b"})
	var held []Lease
	for i := range 3 {
		l, err := bal.Acquire(old, old.AppByName("www"), nil)
		if err != nil {
			t.Fatalf("lease %d through the old snapshot: %v", i, err)
		}
		held = append(held, l)
	}
	if l, err := bal.Acquire(old, old.AppByName("www"), nil); err == nil {
		held = append(held, l)
		t.Errorf("a 4th lease through the old snapshot on an address of capacity 3")
	}
	if more := acquireAll(t, bal); len(more) != 0 {
		t.Errorf("took %d more through the current snapshot with 3 held on capacity 3", len(more))
		held = append(held, more...)
	}
	for _, l := range held {
		l.Release()
	}
}
