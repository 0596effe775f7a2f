package proxy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
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
			cfg := testConfig([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, cbs)
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
				if got := backendCounter(t, e.balReg, "pollbal_backend_full_total", id); got != tt.wantFull[id] {
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

// backendCounter reads the counter name{backend=id} from reg; 0 when the series is absent.
func backendCounter(t testing.TB, reg *prometheus.Registry, name, id string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "backend" && lp.GetValue() == id {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
