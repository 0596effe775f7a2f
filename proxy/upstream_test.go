package proxy

import (
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
)

// dialCounter is a real fasthttp backend on 127.0.0.1 that counts the connections its requests
// came on.
type dialCounter struct {
	*backend
	mu    sync.Mutex
	conns map[uint64]bool
}

func startDialCounter(t *testing.T) *dialCounter {
	t.Helper()
	d := &dialCounter{conns: map[uint64]bool{}}
	d.backend = startBackend(t, func(ctx *fasthttp.RequestCtx) {
		d.mu.Lock()
		d.conns[ctx.ConnID()] = true
		d.mu.Unlock()
		ctx.SetBodyString("ok")
	})
	return d
}

// dials is the number of connections the backend has seen requests on.
func (d *dialCounter) dials() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// forwardOn forwards one GET for host the way the handler does, but on snap, as a request that
// loaded snap before a reload would. It returns the status code and the backend that answered.
func forwardOn(t *testing.T, p *Proxy, snap *balancer.Snapshot, host string) (int, string) {
	t.Helper()
	h := newHandlerCall()
	h.tmpl.Header.SetHost(host)
	h.tmpl.CopyTo(&h.ctx.Request)
	app := snap.Route([]byte(host))
	if app == nil {
		t.Fatalf("no app for %s", host)
	}
	e := p.beginEntry(&h.ctx, snap.Config(), p.clock.Now())
	defer p.entries.put(e)
	p.forwardSafely(&h.ctx, snap, app, e)
	return h.ctx.Response.StatusCode(), string(h.ctx.Response.Header.Peek(headerBackend))
}

// Requests that loaded the snapshot from before a capacity change and requests on the new one,
// alternating, share one connection to the backend: neither rebuilds the backend's pool nor
// closes its idle connection. The failure it guards against: each switch rebuilding the client
// at the capacity of the request's snapshot and closing the other one's idle connections, one
// dial per request.
func TestOldAndNewSnapshotsShareConnections(t *testing.T) {
	be := startDialCounter(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 5}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	old := e.bal.Snapshot()
	next := *cfg
	next.Backends = []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 7}}
	e.bal.Update(&next)
	cur := e.bal.Snapshot()
	if cur == old {
		t.Fatal("the update published no new snapshot")
	}
	const rounds = 10
	for i := 0; i < rounds; i++ {
		for _, snap := range []*balancer.Snapshot{old, cur} {
			if code, id := forwardOn(t, e.p, snap, "shop.test"); code != 200 || id != "b1" {
				t.Fatalf("round %d: got %d from %q, want 200 from b1", i, code, id)
			}
		}
	}
	if n := be.dials(); n != 1 {
		t.Errorf("%d connections to the backend for %d requests alternating between two snapshots, want 1", n, 2*rounds)
	}
	if n := e.p.upstreams.Get(cur, backendOf(t, e.bal, "b1")).IdleCount(); n != 1 {
		t.Errorf("%d idle connections kept, want 1", n)
	}
}

// The pools follow the balancer by themselves: the first request after bal.Update uses the
// new configuration's table, with nothing else called; a backend that stays keeps its pool
// and idle connection whatever its capacity; one that left (here: renamed) has its pool
// retired; and a request still on the old snapshot that leases the removed backend is served
// without its connection being kept for anyone.
func TestPoolsFollowTheBalancer(t *testing.T) {
	stay, leave := startDialCounter(t), startDialCounter(t)
	cfg := configtest.New([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test"}},
		{Name: "blog", Hosts: []string{"blog.test"}, Pool: "pool-blog"},
	}, []configs.Backend{
		{ID: "stay", Address: stay.addr, Capacity: 5},
		{ID: "leave", Address: leave.addr, Capacity: 5, Pool: "pool-blog"},
	}, tieBreakID)

	e := newEnv(t, cfg, "stay", "leave")
	for _, host := range []string{"shop.test", "blog.test"} {
		if r := e.do("GET", host, "/", ""); r.code != 200 {
			t.Fatalf("%s: got %v", host, r)
		}
	}
	old := e.bal.Snapshot()
	stayB, leaveB := backendOf(t, e.bal, "stay"), backendOf(t, e.bal, "leave")
	stayPool, leavePool := e.p.upstreams.Get(old, stayB), e.p.upstreams.Get(old, leaveB)

	next := *cfg
	next.Backends = []configs.Backend{
		{ID: "stay", Address: stay.addr, Capacity: 9},
		{ID: "renamed", Address: leave.addr, Capacity: 5, Pool: "pool-blog"},
	}
	e.bal.Update(&next)
	if r := e.do("GET", "shop.test", "/", ""); r.code != 200 || r.headers["x-pollbal-backend"] != "stay" {
		t.Fatalf("got %v, want 200 from stay", r)
	}
	cur := e.bal.Snapshot()
	if got := e.p.upstreams.Get(cur, stayB); got != stayPool {
		t.Error("the backend that stayed (capacity 5 → 9) got a new pool")
	}
	if n := stay.dials(); n != 1 {
		t.Errorf("%d connections to the backend that stayed, want 1 (its idle one reused)", n)
	}
	if built, pools := e.p.upstreams.Built(); built != cur.Config() || pools != 2 {
		t.Errorf("table after the reload: config current %v, %d pools, want the current config's two pools", built == cur.Config(), pools)
	}
	if n := leavePool.IdleCount(); n != 0 {
		t.Errorf("%d idle connections kept to the removed backend, want 0", n)
	}

	// A request that loaded the old snapshot before the reload still leases the removed backend
	// (its address is still configured, so it has a limit).
	if code, id := forwardOn(t, e.p, old, "blog.test"); code != 200 || id != "leave" {
		t.Fatalf("old snapshot: got %d from %q, want 200 from leave", code, id)
	}
	if n := leavePool.IdleCount(); n != 0 {
		t.Errorf("%d idle connections kept to the removed backend after a request on the old snapshot, want 0", n)
	}
	if n := leave.dials(); n != 2 {
		t.Errorf("%d connections to the removed backend, want 2 (the request on the old snapshot dialled its own)", n)
	}
	if built, pools := e.p.upstreams.Built(); built != cur.Config() || pools != 2 {
		t.Error("a request on the old snapshot replaced the current table")
	}
	e.waitIdle()
}
