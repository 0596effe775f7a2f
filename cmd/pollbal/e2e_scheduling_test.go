package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// schedulingConfig: acme-1, acme-2 owned by acme; def-1, def-2 in default. Apps: shop (explicit
// pool-acme, fail-closed), blog (owner acme: falls back to default), www (default).
func schedulingConfig(addr map[string]string, capacity int, retries int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: e2e
listen: LISTEN
admin:
  listen: ADMIN
poll:
  interval: 500ms
  timeout: 450ms
  max_backoff: 1s
proxy:
  retries: %d
  backend_timeout: 5s
services:
  web: {}
apps:
  - name: shop
    hosts: ["shop.test"]
    pool: pool-acme
  - name: blog
    hosts: ["blog.test"]
    owner: acme
  - name: www
    hosts: ["*"]
backends:
`, retries)
	for _, id := range []string{"acme-1", "acme-2", "def-1", "def-2"} {
		owner := ""
		if strings.HasPrefix(id, "acme") {
			owner = "\n    owner: acme"
		}
		fmt.Fprintf(&b, "  - id: %s\n    address: %s\n    capacity: %d%s\n", id, addr[id], capacity, owner)
	}
	return b.String()
}

func startSchedulingSetup(t *testing.T, capacity, retries int, delay string) (*instance, map[string]*backend) {
	t.Helper()
	bs := map[string]*backend{}
	addr := map[string]string{}
	for _, id := range []string{"acme-1", "acme-2", "def-1", "def-2"} {
		bs[id] = startBackend(t, id, "127.0.0.1:0", "web serving v1\n", "-delay", delay)
		addr[id] = bs[id].addr
	}
	pb := startPollbal(t, schedulingConfig(addr, capacity, retries))
	testproc.WaitFor(t, 5*time.Second, "all backends ready", func() bool {
		s := pb.state(t)
		for id := range bs {
			if ready, _, _, _ := s.backend(id); !ready {
				return false
			}
		}
		return true
	})
	return pb, bs
}

// client is a keep-alive HTTP client for load.
func loadClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

type answer struct {
	code                   int
	backend, pool, reason  string
	retryAfter, bodyPrefix string
}

func do(t testing.TB, c *http.Client, url, host string) (answer, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{
		code: resp.StatusCode, backend: resp.Header.Get("X-Pollbal-Backend"), pool: resp.Header.Get("X-Pollbal-Pool"),
		reason: resp.Header.Get("X-Pollbal-Reason"), retryAfter: resp.Header.Get("Retry-After"), bodyPrefix: string(body),
	}, nil
}

// TestEndToEndCapacityAndIsolation drives 4× the total capacity through the real binary: each
// backend's own peak concurrency never exceeds its capacity, and requests for the isolated pool
// never reach another pool's backend.
func TestEndToEndCapacityAndIsolation(t *testing.T) {
	const capacity = 3
	pb, bs := startSchedulingSetup(t, capacity, 1, "30ms")
	url := "http://" + pb.listen + "/"
	workers := 4 * capacity * len(bs)
	c := loadClient(workers)
	var served, refused atomic.Int64
	var wrongPool atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			host := []string{"shop.test", "www.test"}[w%2]
			for time.Now().Before(deadline) {
				a, err := do(t, c, url, host)
				if err != nil {
					t.Errorf("request: %v", err)
					return
				}
				switch a.code {
				case 200:
					served.Add(1)
					if host == "shop.test" && !strings.HasPrefix(a.backend, "acme-") {
						wrongPool.Add(1)
					}
				case 503:
					refused.Add(1)
				default:
					t.Errorf("unexpected %d (%s)", a.code, a.reason)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if wrongPool.Load() != 0 {
		t.Fatalf("%d shop requests were served outside pool-acme", wrongPool.Load())
	}
	if served.Load() == 0 {
		t.Fatal("nothing was served")
	}
	reachedCap := false
	for id, b := range bs {
		st := b.stats(t)
		if st.PeakInFlight > capacity {
			t.Errorf("%s peak concurrency %d > capacity %d", id, st.PeakInFlight, capacity)
		}
		if st.PeakInFlight == capacity {
			reachedCap = true
		}
		t.Logf("%s: %d requests, peak %d", id, st.Requests, st.PeakInFlight)
	}
	if !reachedCap {
		t.Fatal("no backend ever reached its capacity: the load did not test the limit")
	}
	t.Logf("served %d, refused (503) %d", served.Load(), refused.Load())
	// The default pool's backends never saw shop traffic: they only served www requests, which
	// the counters cannot tell apart; the shop side is checked through X-Pollbal-Backend above.
}

// TestEndToEndFailClosedAndFallback: with pool-acme empty, the explicit app is refused with the
// SPEC's 503 and the owner app is served from default.
func TestEndToEndFailClosedAndFallback(t *testing.T) {
	pb, bs := startSchedulingSetup(t, 8, 1, "0s")
	bs["acme-1"].setPool(t, "")
	bs["acme-2"].setPool(t, "")
	testproc.WaitFor(t, 5*time.Second, "pool-acme has no candidate", func() bool {
		for _, a := range pb.state(t).Apps {
			if a.Name == "shop" {
				return a.Candidates == 0
			}
		}
		return false
	})
	c := loadClient(4)
	url := "http://" + pb.listen + "/"
	a, err := do(t, c, url, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	if a.code != 503 || a.reason != "pool_exhausted" || a.retryAfter != "1" ||
		!strings.Contains(a.bodyPrefix, "shop") || !strings.Contains(a.bodyPrefix, "pool-acme") || !strings.Contains(a.bodyPrefix, "web") {
		t.Fatalf("fail-closed answer %+v, want 503 pool_exhausted with Retry-After 1 naming app, service and pool", a)
	}
	b, err := do(t, c, url, "blog.test")
	if err != nil {
		t.Fatal(err)
	}
	if b.code != 200 || b.pool != "default" || !strings.HasPrefix(b.backend, "def-") {
		t.Fatalf("fallback answer %+v, want 200 from default", b)
	}
	m := pb.metrics(t)
	for _, want := range []string{
		`pollbal_pool_exhausted_total{app="shop",pool="pool-acme"} 1`,
		`pollbal_pool_fallback_total{app="blog",pool="pool-acme"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	pb.WaitOutput(t, 5*time.Second, "the pool_exhausted alarm logged", "pool_exhausted")
	pb.WaitOutput(t, 5*time.Second, "the pool_fallback event logged", "pool_fallback")
}

// TestEndToEndKilledBackendCostsNoRequest: a backend killed mid-load costs no failed idempotent
// request when retries are on.
func TestEndToEndKilledBackendCostsNoRequest(t *testing.T) {
	pb, bs := startSchedulingSetup(t, 64, 2, "5ms")
	c := loadClient(8)
	url := "http://" + pb.listen + "/"
	var failed, served atomic.Int64
	var failures sync.Map
	stop := testproc.Workers(8, func(_, _ int) bool {
		a, err := do(t, c, url, "www.test")
		if err != nil || a.code != 200 {
			failed.Add(1)
			failures.Store(fmt.Sprintf("%v %d %s", err, a.code, a.reason), true)
		} else {
			served.Add(1)
		}
		return true
	})
	testproc.WaitFor(t, 5*time.Second, "load running on def-1", func() bool { return bs["def-1"].stats(t).Requests > 50 })
	bs["def-1"].Kill()
	before := served.Load()
	testproc.WaitFor(t, 5*time.Second, "def-1 not ready", func() bool {
		ready, _, _, _ := pb.state(t).backend("def-1")
		return !ready
	})
	testproc.WaitFor(t, 5*time.Second, "more load after the kill", func() bool { return served.Load() > before+200 })
	stop()
	if failed.Load() != 0 {
		var kinds []string
		failures.Range(func(k, _ any) bool { kinds = append(kinds, k.(string)); return true })
		t.Fatalf("%d requests failed after killing a backend mid-load: %v", failed.Load(), kinds)
	}
	t.Logf("served %d requests, none failed", served.Load())
}
