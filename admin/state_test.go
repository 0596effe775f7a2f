package admin

import (
	"encoding/json"
	"testing"
	"time"

	"pollbal/balancer"
	"pollbal/internal/testproc"
	"pollbal/protocol"
)

// A request queued for a slot shows in its pool's "queued", in /api/state and in GET
// /admin/pools alike, and leaves it once it is served.
func TestStateShowsQueuedRequests(t *testing.T) {
	cfg := testConfig()
	cfg.Proxy.QueueTimeout = time.Minute
	cfg.Proxy.MaxQueue = 10
	cfg.Backends[2].Capacity = 1 // web-3, blog's only backend in default
	f := newFixture(t, fixtureOptions{config: cfg})
	f.markReady("web-3")
	snap := f.bal.Snapshot()
	blog := snap.AppByName("blog")
	held, err := f.bal.Acquire(snap, blog, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan balancer.Lease, 1)
	go func() {
		l, err := f.bal.Wait(snap, blog, nil)
		if err != nil {
			t.Errorf("the queued request: %v", err)
		}
		served <- l
	}()
	testproc.WaitFor(t, 10*time.Second, "a request queued in default", func() bool { return f.bal.QueueLength("default") == 1 })

	queued := func(what string, pools []PoolState) map[string]int {
		t.Helper()
		out := map[string]int{}
		for _, p := range pools {
			out[p.Name] = p.Queued
		}
		if len(out) == 0 {
			t.Fatalf("%s lists no pool", what)
		}
		return out
	}
	var st State
	if err := json.Unmarshal([]byte(f.do(t, "GET", "/api/state", "", "").body), &st); err != nil {
		t.Fatal(err)
	}
	if q := queued("/api/state", st.Pools); q["default"] != 1 || q["pool-acme"] != 0 {
		t.Errorf("/api/state queued %v, want 1 in default and none elsewhere", q)
	}
	var answer struct{ Pools []PoolState }
	if err := json.Unmarshal([]byte(f.do(t, "GET", "/admin/pools", bearer(testToken), "").body), &answer); err != nil {
		t.Fatal(err)
	}
	if q := queued("/admin/pools", answer.Pools); q["default"] != 1 {
		t.Errorf("/admin/pools queued %v, want 1 in default", q)
	}

	held.Release() // the slot goes to the queued request
	l := <-served
	defer l.Release()
	st = State{}
	if err := json.Unmarshal([]byte(f.do(t, "GET", "/api/state", "", "").body), &st); err != nil {
		t.Fatal(err)
	}
	if q := queued("/api/state", st.Pools); q["default"] != 0 {
		t.Errorf("/api/state queued %v after the request was served, want none", q)
	}
}

// A backend whose readiness came from a previous process's state shows "restored": true in
// /api/state, as ready as it was, until its first check; the others show false.
func TestStateShowsRestoredBackends(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	saved := balancer.Runtime{ID: "web-1", Address: "127.0.0.1:10001", Health: balancer.Health{
		Ready: true, Checked: time.Now(), Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}},
	}}
	if n := f.bal.Restore([]balancer.Runtime{saved}); n != 1 {
		t.Fatalf("restored %d backends, want 1", n)
	}
	restored := func() map[string]BackendState {
		t.Helper()
		var st State
		if err := json.Unmarshal([]byte(f.do(t, "GET", "/api/state", "", "").body), &st); err != nil {
			t.Fatal(err)
		}
		out := map[string]BackendState{}
		for _, b := range st.Backends {
			out[b.ID] = b
		}
		return out
	}
	got := restored()
	if b := got["web-1"]; !b.Restored || !b.Ready {
		t.Errorf("web-1 after the restore: restored %v, ready %v; want both", b.Restored, b.Ready)
	}
	if b := got["web-2"]; b.Restored || b.Ready {
		t.Errorf("web-2, which had no saved state: restored %v, ready %v; want neither", b.Restored, b.Ready)
	}
	f.markReady("web-1")
	if b := restored()["web-1"]; b.Restored || !b.Ready {
		t.Errorf("web-1 after its first check: restored %v, ready %v; want ready, not restored", b.Restored, b.Ready)
	}
}
