package proxy

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

func TestRouting(t *testing.T) {
	shop := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("shop " + string(ctx.Request.Header.RequestURI())) })
	blog := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("blog " + string(ctx.Request.Header.RequestURI())) })
	cfg := configtest.New([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test", "*.shop.test"}},
		{Name: "blog", Hosts: []string{"blog.test"}, Pool: "pool-blog"},
	}, []configs.Backend{
		{ID: "shop-1", Address: shop.addr},
		{ID: "blog-1", Address: blog.addr, Pool: "pool-blog"},
	}, tieBreakID)

	e := newEnv(t, cfg, "shop-1", "blog-1")
	tests := []struct {
		name        string
		host, path  string
		wantCode    int
		wantBody    string
		wantBackend string
		wantPool    string
		wantReason  string
	}{
		{name: "exact host", host: "shop.test", path: "/a", wantCode: 200, wantBody: "shop /a", wantBackend: "shop-1", wantPool: "default"},
		{name: "wildcard host with port", host: "www.shop.test:8080", path: "/b", wantCode: 200, wantBody: "shop /b", wantBackend: "shop-1", wantPool: "default"},
		{name: "host case ignored", host: "BLOG.test", path: "/", wantCode: 200, wantBody: "blog /", wantBackend: "blog-1", wantPool: "pool-blog"},
		{name: "path kept as sent", host: "blog.test", path: "/x/../y//z?q=1", wantCode: 200, wantBody: "blog /x/../y//z?q=1", wantBackend: "blog-1", wantPool: "pool-blog"},
		{name: "no app", host: "other.test", path: "/", wantCode: 404, wantBody: "no app matches this host\n", wantReason: "no_app"},
		{name: "wildcard needs a label", host: "x.blog.test", path: "/", wantCode: 404, wantBody: "no app matches this host\n", wantReason: "no_app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.host, tt.path, "")
			if r.code != tt.wantCode || r.body != tt.wantBody {
				t.Fatalf("got %v, want %d %q", r, tt.wantCode, tt.wantBody)
			}
			if r.headers["x-pollbal-backend"] != tt.wantBackend || r.headers["x-pollbal-pool"] != tt.wantPool {
				t.Errorf("backend/pool headers %q/%q, want %q/%q", r.headers["x-pollbal-backend"], r.headers["x-pollbal-pool"], tt.wantBackend, tt.wantPool)
			}
			if r.headers["x-pollbal-reason"] != tt.wantReason {
				t.Errorf("reason %q, want %q", r.headers["x-pollbal-reason"], tt.wantReason)
			}
			if tt.wantReason != "" && r.headers["content-type"] != textPlain {
				t.Errorf("content-type %q, want %q", r.headers["content-type"], textPlain)
			}
		})
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="-",code="404"}`); got != 2 {
		t.Errorf(`requests_total{app="-",code="404"} = %v, want 2`, got)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="blog",code="200"}`); got != 2 {
		t.Errorf(`requests_total{app="blog",code="200"} = %v, want 2`, got)
	}
	if got := metrictest.Count(t, e.reg, "pollbal_request_duration_seconds"); got != 3 {
		t.Errorf("request_duration_seconds has %d series, want 3 (shop, blog, -)", got)
	}
}

func TestFailClosed(t *testing.T) {
	ok := okBackend(t)
	cfg := configtest.New([]configs.App{
		{Name: "strict", Hosts: []string{"strict.test"}, Pool: "pool-strict"},
		{Name: "tenant", Hosts: []string{"tenant.test"}, Owner: "acme"},
		{Name: "closed", Hosts: []string{"closed.test"}, Owner: "beta", AllowFallbackToDefault: boolp(false)},
	}, []configs.Backend{
		{ID: "shared-1", Address: ok.addr},
		{ID: "strict-1", Address: ok.addr, Pool: "pool-strict"},
	}, tieBreakID)

	e := newEnv(t, cfg, "shared-1")
	tests := []struct {
		name       string
		host       string
		wantCode   int
		wantPool   string
		wantBody   string
		wantReason string
	}{
		{name: "pool has backends but no candidate", host: "strict.test", wantCode: 503, wantReason: "pool_exhausted",
			wantBody: "no available backend: app strict, service web, pool pool-strict\n"},
		{name: "owner pool empty, fallback to default", host: "tenant.test", wantCode: 200, wantPool: "default", wantBody: "ok"},
		{name: "owner pool empty, fallback refused", host: "closed.test", wantCode: 503, wantReason: "pool_exhausted",
			wantBody: "no available backend: app closed, service web, pool pool-beta\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("GET", tt.host, "/", "")
			if r.code != tt.wantCode || r.body != tt.wantBody || r.headers["x-pollbal-reason"] != tt.wantReason {
				t.Fatalf("got %v, want %d %q reason %q", r, tt.wantCode, tt.wantBody, tt.wantReason)
			}
			if tt.wantCode == 503 {
				if r.headers["retry-after"] != "1" || r.headers["content-type"] != textPlain {
					t.Errorf("503 headers %v, want Retry-After: 1 and text/plain", r.headers)
				}
				if strings.Count(r.body, "\n") != 1 {
					t.Errorf("503 body %q is not one line", r.body)
				}
			}
			if r.headers["x-pollbal-pool"] != tt.wantPool {
				t.Errorf("X-Pollbal-Pool %q, want %q", r.headers["x-pollbal-pool"], tt.wantPool)
			}
		})
	}
	e.waitIdle()
}

func TestBodyLimit(t *testing.T) {
	echo := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBody(ctx.Request.Body()) })
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: echo.addr}}, tieBreakID)
	cfg.Proxy.MaxRequestBody = 1000
	e := newEnv(t, cfg, "b1")
	withLimit := func(n int) func() {
		return func() {
			next := *cfg
			next.Proxy.MaxRequestBody = n
			e.bal.Update(&next)
		}
	}
	tests := []struct {
		name     string
		before   func()
		bodyLen  int
		chunked  bool
		wantCode int
	}{
		{name: "at the limit", bodyLen: 1000, wantCode: 200},
		{name: "over the limit", bodyLen: 1001, wantCode: 413},
		{name: "chunked over the limit", bodyLen: 5000, chunked: true, wantCode: 413},
		{name: "reload lowers the limit", before: withLimit(100), bodyLen: 101, wantCode: 413},
		{name: "reload raises the limit", before: withLimit(4000), bodyLen: 3000, wantCode: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			body := strings.Repeat("x", tt.bodyLen)
			var r result
			if tt.chunked {
				r = rawExchange(t, e.ln, "POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n"+
					chunk(body)+"0\r\n\r\n")
			} else {
				r = e.do("POST", "shop.test", "/", body)
			}
			if r.code != tt.wantCode {
				t.Fatalf("got %v, want %d", r, tt.wantCode)
			}
			switch tt.wantCode {
			case 200:
				if r.body != body {
					t.Errorf("echoed %d bytes, want %d", len(r.body), len(body))
				}
			case 413:
				if r.headers["x-pollbal-reason"] != "body_too_large" || !strings.HasSuffix(r.body, " bytes\n") {
					t.Errorf("413 answer %v, want reason body_too_large and a one-line body", r)
				}
			}
		})
	}
	e.waitIdle()
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="shop",code="413"}`); got != 3 {
		t.Errorf(`requests_total{app="shop",code="413"} = %v, want 3`, got)
	}

	// A body read under the old limit, handled after a reload lowered it: the handler's own
	// check answers (fasthttp's limit was fixed when the headers arrived).
	h := newHandlerCall()
	h.tmpl.Header.SetMethod("POST")
	h.tmpl.SetBodyString(strings.Repeat("x", 4001))
	h.tmpl.CopyTo(&h.ctx.Request)
	e.p.Handler(&h.ctx)
	if code, reason := h.ctx.Response.StatusCode(), string(h.ctx.Response.Header.Peek("X-Pollbal-Reason")); code != 413 || reason != "body_too_large" {
		t.Errorf("handler answered %d %q to a body over the limit, want 413 body_too_large", code, reason)
	}
	if n := echo.hits.Load(); n != 2 {
		t.Errorf("backend received %d requests, want 2 (only those within the limit)", n)
	}
}

func chunk(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(len(s), 1000)
		b.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n" + s[:n] + "\r\n")
		s = s[n:]
	}
	return b.String()
}

func TestBackendTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := startBackend(t, func(ctx *fasthttp.RequestCtx) { <-release })
	t.Cleanup(func() { close(release) })
	spare := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{
		{ID: "a-slow", Address: slow.addr},
		{ID: "b-spare", Address: spare.addr},
	}, tieBreakID)

	cfg.Proxy.BackendTimeout = 100 * time.Millisecond
	e := newEnv(t, cfg, "a-slow", "b-spare")
	r := e.do("GET", "shop.test", "/", "")
	if r.code != 504 || r.headers["x-pollbal-reason"] != "backend_timeout" || r.headers["x-pollbal-backend"] != "a-slow" {
		t.Fatalf("got %v, want 504 backend_timeout from a-slow", r)
	}
	if n := spare.hits.Load(); n != 0 {
		t.Errorf("timed-out request was retried: spare backend got %d requests", n)
	}
	e.waitIdle()
	if backendOf(t, e.bal, "a-slow").Ejected() {
		t.Error("one timeout ejected a backend with eject_after 3")
	}
}

func TestUnreachable(t *testing.T) {
	tests := []struct {
		name        string
		first       string // kind of the first backend: refused, hangup, garbage
		second      bool   // a working second backend exists
		retries     int
		method      string
		wantCode    int
		wantBackend string
		wantReason  string
		wantFirst   int64 // requests the hangup backend received
	}{
		{name: "dial refused, GET retried on next", first: "refused", second: true, retries: 1, method: "GET", wantCode: 200, wantBackend: "b-ok"},
		{name: "dial refused, POST retried too (nothing sent)", first: "refused", second: true, retries: 1, method: "POST", wantCode: 200, wantBackend: "b-ok"},
		{name: "dial refused, no retries configured", first: "refused", second: true, retries: 0, method: "GET", wantCode: 502, wantBackend: "a-bad", wantReason: "backend_unreachable"},
		{name: "dial refused, no other candidate", first: "refused", second: false, retries: 1, method: "GET", wantCode: 502, wantBackend: "a-bad", wantReason: "backend_unreachable"},
		{name: "hangup after send, GET retried", first: "hangup", second: true, retries: 1, method: "GET", wantCode: 200, wantBackend: "b-ok", wantFirst: 1},
		{name: "hangup after send, PUT retried", first: "hangup", second: true, retries: 1, method: "PUT", wantCode: 200, wantBackend: "b-ok", wantFirst: 1},
		{name: "hangup after send, POST not retried", first: "hangup", second: true, retries: 1, method: "POST", wantCode: 502, wantBackend: "a-bad", wantReason: "backend_unreachable", wantFirst: 1},
		{name: "unusable answer, GET not retried", first: "garbage", second: true, retries: 1, method: "GET", wantCode: 502, wantBackend: "a-bad", wantReason: "bad_response", wantFirst: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var firstAddr string
			var hits interface{ Load() int64 }
			switch tt.first {
			case "refused":
				firstAddr = testproc.FreeAddr(t)
			case "hangup":
				a, h := rawBackendAddr(t, "")
				firstAddr, hits = a, h
			case "garbage":
				a, h := rawBackendAddr(t, "NOT HTTP AT ALL\r\n\r\n")
				firstAddr, hits = a, h
			}
			ok := okBackend(t)
			backends := []configs.Backend{{ID: "a-bad", Address: firstAddr}}
			ready := []string{"a-bad"}
			if tt.second {
				backends = append(backends, configs.Backend{ID: "b-ok", Address: ok.addr})
				ready = append(ready, "b-ok")
			}
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, backends, tieBreakID)
			cfg.Proxy.Retries = tt.retries
			e := newEnv(t, cfg, ready...)
			r := e.do(tt.method, "shop.test", "/", "payload")
			if r.code != tt.wantCode || r.headers["x-pollbal-backend"] != tt.wantBackend || r.headers["x-pollbal-reason"] != tt.wantReason {
				t.Fatalf("got %v, want %d from %s reason %q", r, tt.wantCode, tt.wantBackend, tt.wantReason)
			}
			if tt.wantReason != "" && strings.Count(r.body, "\n") != 1 {
				t.Errorf("body %q is not one line", r.body)
			}
			if hits != nil && hits.Load() != tt.wantFirst {
				t.Errorf("first backend received %d requests, want %d", hits.Load(), tt.wantFirst)
			}
			wantOK := int64(0)
			if tt.wantBackend == "b-ok" {
				wantOK = 1
			}
			if ok.hits.Load() != wantOK {
				t.Errorf("working backend received %d requests, want %d", ok.hits.Load(), wantOK)
			}
			e.waitIdle()
		})
	}
}

// TestEjectAfter checks that failed forwards reach the balancer: eject_after consecutive
// failures take the backend out, and the pool then fails closed.
func TestEjectAfter(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}, Pool: "pool-x"}}, []configs.Backend{{ID: "a-bad", Address: testproc.FreeAddr(t), Pool: "pool-x"}}, tieBreakID)

	cfg.Proxy.EjectAfter = 2
	cfg.Proxy.Retries = 0
	e := newEnv(t, cfg, "a-bad")
	want := []int{502, 502, 503}
	for i, code := range want {
		if r := e.do("GET", "shop.test", "/", ""); r.code != code {
			t.Fatalf("request %d: got %v, want %d", i+1, r, code)
		}
	}
	if !backendOf(t, e.bal, "a-bad").Ejected() {
		t.Error("backend not ejected after eject_after failed forwards")
	}
}

func TestLeasesReleased(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	slow := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		arrived <- struct{}{}
		<-release
		ctx.SetBodyString("late")
	})
	t.Cleanup(func() { close(release) })
	ok := okBackend(t)
	cfg := configtest.New([]configs.App{
		{Name: "ok", Hosts: []string{"ok.test"}, Pool: "pool-ok"},
		{Name: "bad", Hosts: []string{"bad.test"}, Pool: "pool-bad"},
		{Name: "slow", Hosts: []string{"slow.test"}, Pool: "pool-slow"},
	}, []configs.Backend{
		{ID: "ok-1", Address: ok.addr, Pool: "pool-ok"},
		{ID: "bad-1", Address: testproc.FreeAddr(t), Pool: "pool-bad"},
		{ID: "slow-1", Address: slow.addr, Pool: "pool-slow"},
	}, tieBreakID)

	cfg.Proxy.BackendTimeout = 150 * time.Millisecond
	e := newEnv(t, cfg, "ok-1", "bad-1", "slow-1")

	tests := []struct {
		name    string
		backend string
		run     func(t *testing.T)
	}{
		{name: "success", backend: "ok-1", run: func(t *testing.T) {
			if r := e.do("GET", "ok.test", "/", ""); r.code != 200 {
				t.Fatalf("got %v", r)
			}
		}},
		{name: "unreachable", backend: "bad-1", run: func(t *testing.T) {
			if r := e.do("GET", "bad.test", "/", ""); r.code != 502 {
				t.Fatalf("got %v", r)
			}
		}},
		{name: "timeout", backend: "slow-1", run: func(t *testing.T) {
			if r := e.do("GET", "slow.test", "/", ""); r.code != 504 {
				t.Fatalf("got %v", r)
			}
			<-arrived
		}},
		{name: "client gone", backend: "slow-1", run: func(t *testing.T) {
			c, err := e.ln.Dial()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: slow.test\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			<-arrived
			if n := backendOf(t, e.bal, "slow-1").InFlight(); n != 1 {
				t.Errorf("in flight while forwarding = %d, want 1", n)
			}
			if n := e.p.handling.Load(); n != 1 {
				t.Errorf("requests in the handler while forwarding = %d, want 1", n)
			}
			_ = c.Close()
			// The lease is held until the forward ends (here: the backend timeout).
		}},
	}
	tests = append(tests, struct {
		name    string
		backend string
		run     func(t *testing.T)
	}{name: "panic while forwarding", backend: "ok-1", run: func(t *testing.T) {
		e.p.afterDo = func() { panic("injected") }
		defer func() { e.p.afterDo = nil }()
		if r := e.do("GET", "ok.test", "/", ""); r.code != 500 || r.headers["x-pollbal-reason"] != "internal_error" {
			t.Fatalf("got %v, want 500 internal_error", r)
		}
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t)
			b := backendOf(t, e.bal, tt.backend)
			testproc.WaitFor(t, 10*time.Second, "lease on "+tt.backend+" to be released", func() bool { return b.InFlight() == 0 })
			// The busy signal that decides whether reads yield (yieldIfBusy) does not drift.
			testproc.WaitFor(t, 10*time.Second, "handler count back to 0", func() bool { return e.p.handling.Load() == 0 })
		})
	}
}

// TestPeakConcurrency sends 4× a backend's capacity at once: exactly capacity requests reach
// it, the rest fail closed, and nothing is left leased afterwards.
func TestPeakConcurrency(t *testing.T) {
	const capacity, clients = 4, 16
	var mu sync.Mutex
	cur, peak := 0, 0
	arrived := make(chan struct{}, clients)
	gate := make(chan struct{})
	slow := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		arrived <- struct{}{}
		<-gate
		mu.Lock()
		cur--
		mu.Unlock()
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "slow", Address: slow.addr, Capacity: capacity}}, tieBreakID)
	e := newEnv(t, cfg, "slow")
	codes := make(chan int, clients)
	for i := 0; i < clients; i++ {
		go func() {
			c := e.newClient()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://shop.test/")
			if err := c.Do(req, resp); err != nil {
				codes <- -1
				return
			}
			codes <- resp.StatusCode()
		}()
	}
	count := map[int]int{}
	for i := 0; i < capacity; i++ {
		<-arrived
	}
	for i := 0; i < clients-capacity; i++ {
		count[<-codes]++
	}
	close(gate)
	for i := 0; i < capacity; i++ {
		count[<-codes]++
	}
	if count[200] != capacity || count[503] != clients-capacity {
		t.Errorf("answers %v, want %d×200 and %d×503", count, capacity, clients-capacity)
	}
	if peak != capacity {
		t.Errorf("peak concurrency at the backend = %d, want %d", peak, capacity)
	}
	e.waitIdle()
}

// TestPeakConcurrencySustained keeps 4× capacity of clients busy against a backend that
// yields while it works: concurrency at the backend never exceeds its capacity.
func TestPeakConcurrencySustained(t *testing.T) {
	const capacity, clients, perClient = 3, 12, 40
	var mu sync.Mutex
	cur, peak := 0, 0
	busy := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		for i := 0; i < 50; i++ { // stay busy without sleeping, so requests overlap
			mu.Lock()
			peak = max(peak, cur)
			mu.Unlock()
		}
		mu.Lock()
		cur--
		mu.Unlock()
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "busy", Address: busy.addr, Capacity: capacity}}, tieBreakID)
	e := newEnv(t, cfg, "busy")
	var wg sync.WaitGroup
	var cmu sync.Mutex
	count := map[int]int{}
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.newClient()
			for j := 0; j < perClient; j++ {
				r := doWith(t, c, "GET", "shop.test", "/", "")
				cmu.Lock()
				count[r.code]++
				cmu.Unlock()
			}
		}()
	}
	wg.Wait()
	if count[200]+count[503] != clients*perClient || count[200] == 0 {
		t.Errorf("answers %v, want only 200 and 503 summing to %d", count, clients*perClient)
	}
	if peak > capacity {
		t.Errorf("peak concurrency at the backend = %d, exceeds capacity %d", peak, capacity)
	}
	e.waitIdle()
}
