package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/alarms"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
)

// fullBackend answers every request 503 with X-Pool-Full, as a backend at its capacity does.
func fullBackend(t testing.TB) *backend {
	return startBackend(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.Response.Header.Set("X-Pool-Full", "1")
		ctx.SetBodyString("full\n")
	})
}

// TestBackendFull checks a backend's refusal (503 + X-Pool-Full): the next candidate at once
// for any method and without using a retry, never an ejection, counted per backend; with no
// candidate left, the answer of an exhausted pool. A plain 503 is the backend's answer.
func TestBackendFull(t *testing.T) {
	tests := []struct {
		name        string
		backends    []string // kinds in id order (tie-break id): full, ok, plain503
		retries     int
		method      string
		body        string
		wantCode    int
		wantBackend string
		wantReason  string
		wantFull    map[string]float64
	}{
		{name: "GET goes on to the next", backends: []string{"full", "ok"}, retries: 1, method: "GET",
			wantCode: 200, wantBackend: "b", wantFull: map[string]float64{"a": 1}},
		{name: "POST goes on too: nothing was processed", backends: []string{"full", "ok"}, retries: 1, method: "POST", body: "payload",
			wantCode: 200, wantBackend: "b", wantFull: map[string]float64{"a": 1}},
		{name: "a refusal uses no retry", backends: []string{"full", "ok"}, retries: 0, method: "POST", body: "payload",
			wantCode: 200, wantBackend: "b", wantFull: map[string]float64{"a": 1}},
		{name: "every candidate full: answered as an exhausted pool", backends: []string{"full", "full"}, retries: 1, method: "GET",
			wantCode: 503, wantReason: "pool_exhausted", wantFull: map[string]float64{"a": 1, "b": 1}},
		// Regression: a refusal whose body was streamed (chunked, or over 64 KiB) was passed to
		// the client as the backend's answer.
		{name: "a refusal with a chunked body goes on too", backends: []string{"fullChunked", "ok"}, retries: 0, method: "GET",
			wantCode: 200, wantBackend: "b", wantFull: map[string]float64{"a": 1}},
		{name: "a plain 503 is the backend's own answer", backends: []string{"plain503", "ok"}, retries: 1, method: "GET",
			wantCode: 503, wantBackend: "a", wantFull: map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cbs []configs.Backend
			var ids []string
			for i, kind := range tt.backends {
				var b *backend
				switch kind {
				case "full":
					b = fullBackend(t)
				case "fullChunked":
					b = startBackend(t, func(ctx *fasthttp.RequestCtx) {
						ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
						ctx.Response.Header.Set("X-Pool-Full", "1")
						ctx.SetBodyStream(strings.NewReader("full\n"), -1)
					})
				case "ok":
					b = okBackend(t)
				case "plain503":
					b = startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusServiceUnavailable) })
				}
				id := string(rune('a' + i))
				cbs = append(cbs, configs.Backend{ID: id, Address: b.addr})
				ids = append(ids, id)
			}
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, cbs, tieBreakID)
			cfg.Proxy.Retries = tt.retries
			cfg.Proxy.EjectAfter = 1
			e := newEnv(t, cfg, ids...)
			r := e.do(tt.method, "shop.test", "/", tt.body)
			if r.code != tt.wantCode || r.headers["x-pollbal-backend"] != tt.wantBackend || r.headers["x-pollbal-reason"] != tt.wantReason {
				t.Fatalf("got %v, want %d from %q reason %q", r, tt.wantCode, tt.wantBackend, tt.wantReason)
			}
			if tt.wantReason != "" && (r.headers["x-pool-full"] != "" || r.headers["retry-after"] != "1" || !strings.Contains(r.body, "app shop")) {
				t.Errorf("exhausted answer %v: want Retry-After 1, pollbal's own body and no X-Pool-Full", r)
			}
			for _, id := range ids {
				if got, _ := metrictest.Value(t, e.balReg, `pollbal_backend_full_total{backend="`+id+`"}`); got != tt.wantFull[id] {
					t.Errorf("pollbal_backend_full_total{backend=%s} = %v, want %v", id, got, tt.wantFull[id])
				}
				if backendOf(t, e.bal, id).Ejected() {
					t.Errorf("backend %s ejected (eject_after 1): a refusal must not count", id)
				}
			}
			e.waitIdle()
		})
	}
}

// TestBackendFullNothingLeft checks a request that every candidate refused as full (503 +
// X-Pool-Full), with real backends on 127.0.0.1: it is answered exactly as for an exhausted pool
// (the same 503, Retry-After and body), and raises pool_exhausted as an exhausted pool does:
// pollbal_pool_exhausted_total counts every such request, the event is deduplicated, the
// webhook gets the alarm. A request that one backend refused and the other served raises
// nothing.
func TestBackendFullNothingLeft(t *testing.T) {
	posts := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		posts <- string(body)
	}))
	t.Cleanup(hook.Close)

	full, ok := fullBackend(t), okBackend(t)
	cbs := []configs.Backend{{ID: "a", Address: full.addr}, {ID: "b", Address: fullBackend(t).addr}}
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, cbs, tieBreakID)
	cfg.Alarms.Webhook = hook.URL
	e := newEnv(t, cfg, "a", "b")

	// The answer of a pool with no candidate at all, for comparison.
	exhausted := exhaustedAnswer(t, e)
	if exhausted.code != 503 || exhausted.headers["x-pollbal-reason"] != "pool_exhausted" {
		t.Fatalf("exhausted pool answered %v, want 503 pool_exhausted", exhausted)
	}
	if got := receive(t, posts); !strings.Contains(got, `"alarm":"pool_exhausted"`) || !strings.Contains(got, `"app":"shop"`) {
		t.Fatalf("webhook got %s, want a pool_exhausted alarm for app shop", got)
	}
	// A new balancer, so the dedup window of that alarm does not hide the refusals' one.
	e = newEnv(t, cfg, "a", "b")

	// The first request meets both backends with a free slot and is refused by both; the
	// refusals lower their limits (until their next report), so the next ones find no
	// candidate at their first try.
	for i := range 3 {
		r := e.do("GET", "shop.test", "/", "")
		if !sameAnswer(r, exhausted) {
			t.Fatalf("request %d refused by both backends: got %v, want the exhausted pool's answer %v", i, r, exhausted)
		}
		if i > 0 {
			continue
		}
		if got := refusals(t, e); got != 2 {
			t.Fatalf("first request: %v refusals, want 2 (one by each backend)", got)
		}
		wantExhausted(t, e, 1, 1, "a request refused by every candidate")
		if got := receive(t, posts); !strings.Contains(got, `"alarm":"pool_exhausted"`) || !strings.Contains(got, `"app":"shop"`) {
			t.Errorf("webhook got %s, want a pool_exhausted alarm for app shop", got)
		}
	}
	wantExhausted(t, e, 3, 1, "3 exhausted answers (the event deduplicated)")
	e.waitIdle()

	// One refusal, then served: not exhausted.
	cbs = []configs.Backend{{ID: "a", Address: full.addr}, {ID: "b", Address: ok.addr}}
	e = newEnv(t, configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, cbs, tieBreakID), "a", "b")
	if r := e.do("GET", "shop.test", "/", ""); r.code != 200 || r.headers["x-pollbal-backend"] != "b" {
		t.Fatalf("got %v, want 200 from b", r)
	}
	wantExhausted(t, e, 0, 0, "a request served by the second candidate")
	e.waitIdle()
}

// receive returns the next alarm posted to the webhook, failing the test after 10 s.
func receive(t *testing.T, posts <-chan string) string {
	t.Helper()
	select {
	case got := <-posts:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no alarm posted to the webhook within 10 s")
		return ""
	}
}

// exhaustedAnswer is the answer e's proxy gives to a request for shop.test while every slot of
// its two backends is held (capacity 10 each, configtest.Capacity): the answer of a pool with
// no candidate at all.
func exhaustedAnswer(t *testing.T, e *env) result {
	t.Helper()
	app := e.bal.Snapshot().Route([]byte("shop.test"))
	var leases []balancer.Lease
	for range 20 {
		l, err := e.bal.Acquire(e.bal.Snapshot(), app, nil)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		leases = append(leases, l)
	}
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	return e.do("GET", "shop.test", "/", "")
}

// refusals is how many requests backends a and b refused as full, together.
func refusals(t *testing.T, e *env) float64 {
	t.Helper()
	a, _ := metrictest.Value(t, e.balReg, `pollbal_backend_full_total{backend="a"}`)
	b, _ := metrictest.Value(t, e.balReg, `pollbal_backend_full_total{backend="b"}`)
	return a + b
}

// wantExhausted checks, after what happened, pollbal_pool_exhausted_total{app=shop} and the
// number of pool_exhausted events.
func wantExhausted(t *testing.T, e *env, count float64, events int, after string) {
	t.Helper()
	if got, _ := metrictest.Value(t, e.balReg, `pollbal_pool_exhausted_total{pool="default",app="shop"}`); got != count {
		t.Errorf("pollbal_pool_exhausted_total{app=shop} = %v after %s, want %v", got, after, count)
	}
	if n := countEvents(e.alarms, "pool_exhausted"); n != events {
		t.Errorf("%d pool_exhausted events after %s, want %d", n, after, events)
	}
}

// sameAnswer reports whether a and b are the same answer: status, body and headers but Date
// and X-Request-Id.
func sameAnswer(a, b result) bool {
	// Each answer has an ID of its own; that both have one is checked where IDs are.
	return a.code == b.code && a.body == b.body && sameHeaders(a.headers, b.headers, "date", "x-request-id")
}

// sameHeaders reports whether a and b are equal but for the headers named in skip.
func sameHeaders(a, b map[string]string, skip ...string) bool {
	diff := func(x, y map[string]string) bool {
		for k, v := range x {
			if !slices.Contains(skip, k) && y[k] != v {
				return true
			}
		}
		return false
	}
	return !diff(a, b) && !diff(b, a)
}

// countEvents counts the events of kind that the balancer's Observer listed.
func countEvents(a *alarms.Notifier, kind string) int {
	n := 0
	for _, ev := range a.Events().List() {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// TestBackendFullNothingLeftQueues checks the same with proxy.queue_timeout set: a request that
// every candidate refused as full waits in the queue as a request to an exhausted pool does,
// raising pool_exhausted as it does, and gets the same answer when no slot frees in time.
func TestBackendFullNothingLeftQueues(t *testing.T) {
	cbs := []configs.Backend{{ID: "a", Address: fullBackend(t).addr}, {ID: "b", Address: fullBackend(t).addr}}
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, cbs, tieBreakID)
	cfg.Proxy.QueueTimeout, cfg.Proxy.MaxQueue = 100*time.Millisecond, 10

	// An exhausted pool: every slot held; the request queues and times out.
	e := newEnv(t, cfg, "a", "b")
	exhausted := exhaustedAnswer(t, e)
	if exhausted.code != 503 || exhausted.headers["x-pollbal-reason"] != "queue_timeout" {
		t.Fatalf("exhausted pool with a queue answered %v, want 503 queue_timeout", exhausted)
	}
	if got, _ := metrictest.Value(t, e.balReg, `pollbal_pool_exhausted_total{pool="default",app="shop"}`); got != 1 {
		t.Fatalf("exhausted pool with a queue: pollbal_pool_exhausted_total %v, want 1", got)
	}

	// Refused by both backends: the same.
	e = newEnv(t, cfg, "a", "b")
	r := e.do("GET", "shop.test", "/", "")
	if !sameAnswer(r, exhausted) {
		t.Fatalf("refused by both backends: got %v, want the exhausted pool's answer %v", r, exhausted)
	}
	if got := refusals(t, e); got != 2 {
		t.Errorf("%v refusals, want 2 (one by each backend, then the queue)", got)
	}
	wantExhausted(t, e, 1, 1, "a request refused by both backends, then timed out in the queue")
	e.waitIdle()
}
