package proxy

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// A request with the most retries the configuration allows, that meets the most refusals as
// full a request follows, never goes back to a backend it already tried: 7 backends refuse it
// as full and 8 drop the connection, and each of the 15 is tried exactly once before the answer
// (before, the set of tried backends held 8, and the 9th backend was tried again and again).
func TestRetriesNeverRevisitABackend(t *testing.T) {
	var (
		backends []configs.Backend
		hits     = map[string]func() int64{}
	)
	for i := 0; i < maxFullRefusals-1; i++ {
		be := fullBackend(t)
		id := fmt.Sprintf("a-full-%d", i)
		backends = append(backends, configs.Backend{ID: id, Address: be.addr})
		hits[id] = be.hits.Load
	}
	for i := 0; i <= configs.MaxRetries; i++ {
		addr, n := rawBackendAddr(t, "")
		id := fmt.Sprintf("b-broken-%d", i)
		backends = append(backends, configs.Backend{ID: id, Address: addr})
		hits[id] = n.Load
	}
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, backends, tieBreakID)
	cfg.Proxy.Retries = configs.MaxRetries
	cfg.Proxy.EjectAfter = 0
	ids := make([]string, len(backends))
	for i, b := range backends {
		ids[i] = b.ID
	}
	e := newEnv(t, cfg, ids...) // tie_break id: the refusing backends first, then the broken ones
	r := e.do("GET", "shop.test", "/", "")
	if r.code != 502 || r.headers["x-pollbal-reason"] != reasonBackendUnreachable || r.headers["x-pollbal-backend"] != "b-broken-7" {
		t.Errorf("got %v, want 502 backend_unreachable for b-broken-7", r)
	}
	for _, id := range ids {
		if n := hits[id](); n != 1 {
			t.Errorf("%s tried %d times, want once", id, n)
		}
	}
	e.waitIdle()
}

// slowDrop is a backend on 127.0.0.1 that takes delay over each request and then drops its
// connection without answering: a failure a GET is retried after.
func slowDrop(t *testing.T, delay time.Duration) *backend {
	return startBackend(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(delay) // the backend's own slowness, not a wait for an event
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) { _ = c.Close() })
	})
}

// The whole forward is bounded by the backend timeout, however many retries are configured:
// with 8 backends that each take 200 ms to drop the request and a 1 s backend timeout, no
// attempt starts 1 s after the request began, so at most 5 backends (starting at 0, 200, 400,
// 600 and 800 ms at the earliest) see it, not the 8 that proxy.retries 7 would allow. Each
// attempt has 800 ms to spare before its own backend timeout, so that a loaded 2-core machine
// under -race does not stretch a drop past it (a 504 from a later backend).
func TestForwardBoundedInTime(t *testing.T) {
	const (
		delay   = 200 * time.Millisecond
		timeout = time.Second
	)
	var (
		backends []configs.Backend
		hits     []*atomic.Int64
		ids      []string
	)
	for i := 0; i <= configs.MaxRetries; i++ {
		be := slowDrop(t, delay)
		id := fmt.Sprintf("b%d", i)
		backends = append(backends, configs.Backend{ID: id, Address: be.addr})
		hits = append(hits, &be.hits)
		ids = append(ids, id)
	}
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, backends, tieBreakID)
	cfg.Proxy.Retries = configs.MaxRetries
	cfg.Proxy.BackendTimeout = timeout
	cfg.Proxy.EjectAfter = 0
	e := newEnv(t, cfg, ids...)
	start := time.Now()
	r := e.do("GET", "shop.test", "/", "")
	elapsed := time.Since(start)
	if r.code != 502 || r.headers["x-pollbal-reason"] != reasonBackendUnreachable {
		t.Errorf("got %v, want 502 backend_unreachable", r)
	}
	var tried int64
	for _, n := range hits {
		tried += n.Load()
	}
	if maxTries := int64((timeout + delay - 1) / delay); tried < 1 || tried > maxTries {
		t.Errorf("%d backends saw the request, want 1 to %d (no attempt starts after the backend timeout)", tried, maxTries)
	}
	// The answer cannot come before the last attempt has failed, and never after 2 × timeout
	// (the last attempt began before timeout and lasted delay < timeout); the margin is for a
	// loaded machine.
	if elapsed < time.Duration(tried)*delay || elapsed > 2*timeout+time.Second {
		t.Errorf("answered after %s for %d attempts of %s, want within 2 × %s", elapsed, tried, delay, timeout)
	}
	e.waitIdle()
}

// Regression: a request that waited in the queue longer than backend_timeout, and whose
// backend then dropped the connection at once, was answered 504 backend_timeout (and never
// retried): the attempt's time included the wait. The backend timeout runs from the lease.
func TestQueueWaitIsNotBackendTime(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr, hits := rawBackendAddr(t, "")
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: addr, Capacity: 1}}, tieBreakID)
	cfg.Proxy.BackendTimeout = timeout
	cfg.Proxy.QueueTimeout = 10 * time.Second
	cfg.Proxy.MaxQueue = 10
	cfg.Proxy.EjectAfter = 0
	e := newEnv(t, cfg, "b1")
	snap := e.bal.Snapshot()
	held, err := e.bal.Acquire(snap, snap.AppByName("shop"), &balancer.Tried{})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code   int
		reason string
		err    error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://shop.test/")
		err := e.newClient().Do(req, resp)
		done <- answer{resp.StatusCode(), string(resp.Header.Peek("X-Pollbal-Reason")), err}
	}()
	testproc.WaitFor(t, 10*time.Second, "the request to queue", func() bool {
		n, _ := metrictest.Value(t, e.balReg, `pollbal_queue_length{pool="default",service="web"}`)
		return n == 1
	})
	testproc.WaitFor(t, 10*time.Second, "the backend timeout to pass while it waits", func() bool {
		return time.Since(start) > timeout+100*time.Millisecond
	})
	held.Release()
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.code != 502 || a.reason != reasonBackendUnreachable {
		t.Errorf("got %d %s, want 502 %s (the connection was dropped at once after the wait)", a.code, a.reason, reasonBackendUnreachable)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the backend saw %d requests, want 1", n)
	}
	e.waitIdle()
}
