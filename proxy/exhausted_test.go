package proxy

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// A retry that finds no other candidate is answered for the failure before it (502), not as an
// exhausted pool: pool_exhausted is not counted, and no alarm is listed.
func TestRetryWithoutCandidateIsNotExhausted(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "down", Address: testproc.FreeAddr(t)}}, tieBreakID)

	cfg.Proxy.Retries, cfg.Proxy.EjectAfter = 1, 0
	e := newEnv(t, cfg, "down")
	if r := e.do("GET", "shop.test", "/", ""); r.code != 502 || r.headers["x-pollbal-reason"] != reasonBackendUnreachable {
		t.Fatalf("got %v, want 502 %s", r, reasonBackendUnreachable)
	}
	if got, _ := metrictest.Value(t, e.balReg, `pollbal_pool_exhausted_total{pool="default",app="shop"}`); got != 0 {
		t.Errorf("pollbal_pool_exhausted_total = %v after a failed forward and a retry without candidates, want 0", got)
	}
	if n := countEvents(e.alarms, "pool_exhausted"); n != 0 {
		t.Errorf("%d pool_exhausted events, want none", n)
	}
}

// With the queue on and requests waiting: a first try that can queue behind them is not an
// exhausted pool (it waits, and is served), while a request whose pool has no ready backend
// at all is, and is answered so at once. A first try that finds no candidate while nobody
// waits counts as exhausted, whether it is served from the queue later or not.
func TestExhaustedWhileOthersWait(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{
		{Name: "www", Hosts: []string{"www.test"}, Pool: "busy"},
		{Name: "shop", Hosts: []string{"shop.test"}, Pool: "dark"},
	}, []configs.Backend{
		{ID: "b1", Address: be.addr, Pool: "busy", Capacity: 1},
		{ID: "d1", Address: testproc.FreeAddr(t), Pool: "dark"},
	}, tieBreakID)

	cfg.Proxy.QueueTimeout, cfg.Proxy.MaxQueue = 30*time.Second, 10
	e := newEnv(t, cfg, "b1") // d1 is never ready: "dark" has no candidate
	snap := e.bal.Snapshot()
	held, err := e.bal.Acquire(snap, snap.AppByName("www"), nil)
	if err != nil {
		t.Fatal(err)
	}
	codes := make(chan int, 2)
	send := func(host string) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://" + host + "/")
		if err := e.newClient().Do(req, resp); err != nil {
			t.Errorf("queued request: %v", err)
			codes <- 0
			return
		}
		codes <- resp.StatusCode()
	}
	pools := map[string]string{"www": "busy", "shop": "dark"}
	exhausted := func(app string) float64 {
		v, _ := metrictest.Value(t, e.balReg, `pollbal_pool_exhausted_total{pool="`+pools[app]+`",app="`+app+`"}`)
		return v
	}

	go send("www.test") // nobody waits yet: no candidate, exhausted, then queued
	testproc.WaitFor(t, 10*time.Second, "the first request queued", func() bool { return e.bal.QueueLength("busy") == 1 })
	if got := exhausted("www"); got != 1 {
		t.Errorf("pollbal_pool_exhausted_total{www} = %v after a first try found no candidate, want 1", got)
	}
	go send("www.test") // queues behind the first: not exhausted
	testproc.WaitFor(t, 10*time.Second, "the second request queued", func() bool { return e.bal.QueueLength("busy") == 2 })
	if got := exhausted("www"); got != 1 {
		t.Errorf("pollbal_pool_exhausted_total{www} = %v after a request queued behind a waiter, want still 1", got)
	}
	if r := e.do("GET", "shop.test", "/", ""); r.code != 503 || r.headers["x-pollbal-reason"] != reasonPoolExhausted {
		t.Fatalf("a pool with no ready backend while others wait: got %v, want 503 %s at once", r, reasonPoolExhausted)
	}
	if got := exhausted("shop"); got != 1 {
		t.Errorf("pollbal_pool_exhausted_total{shop} = %v, want 1", got)
	}
	held.Release()
	for range 2 {
		if code := <-codes; code != 200 {
			t.Errorf("a queued request got %d, want 200 once the slot was released", code)
		}
	}
	if got := exhausted("www"); got != 1 {
		t.Errorf("pollbal_pool_exhausted_total{www} = %v once both were served, want 1", got)
	}
}
