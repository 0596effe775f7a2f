package proxy

import (
	"testing"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// TestHandlerAllocs guards the request path: routing, lease, header rewriting, forwarding on
// the backend's connection pool and metrics together allocate nothing per request once warm (fasthttp
// reuses its buffers; the balancer's own guard covers selection and leases). The measurement
// counts every goroutine, the real backend on 127.0.0.1 included.
func TestHandlerAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race (sync.Pool drops items at random)")
	}
	e := benchEnv(t)
	exhausted := testConfig([]configs.App{{Name: "shop", Hosts: []string{"shop.test", "*.shop.test"}}, {Name: "empty", Hosts: []string{"empty.test"}, Pool: "pool-empty"}},
		[]configs.Backend{{ID: "b1", Address: e.bal.Snapshot().Config().Backends[0].Address, Capacity: 4096}})
	e.bal.Update(exhausted)
	tests := []struct {
		name     string
		host     string
		method   string
		headers  []string
		body     string
		wantCode int
	}{
		{name: "plain GET", host: "www.shop.test", method: "GET", wantCode: 200},
		{name: "browser-like GET with hop-by-hop headers and X-Forwarded-For", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"Connection", "keep-alive", "Keep-Alive", "timeout=5", "X-Forwarded-For", "127.0.0.9",
				"X-Forwarded-For", "127.0.0.10", "X-Forwarded-Proto", "https",
				"Cookie", "a=1; b=2", "Accept-Language", "en"}},
		{name: "Connection naming a custom header", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"Connection", "X-Hop", "X-Hop", "1"}},
		{name: "HEAD (its connection is peeked at before reuse)", host: "shop.test", method: "HEAD", wantCode: 200},
		{name: "POST with a body", host: "shop.test", method: "POST", body: "name=value&other=1", wantCode: 200},
		{name: "no app", host: "other.test", method: "GET", wantCode: 404},
		{name: "pool exhausted", host: "empty.test", method: "GET", wantCode: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandlerCall()
			h.tmpl.Header.SetHost(tt.host)
			h.tmpl.Header.SetMethod(tt.method)
			for i := 0; i+1 < len(tt.headers); i += 2 {
				h.tmpl.Header.Add(tt.headers[i], tt.headers[i+1])
			}
			h.tmpl.SetBodyString(tt.body)
			run := func() {
				h.tmpl.CopyTo(&h.ctx.Request)
				h.ctx.Response.Reset()
				e.p.Handler(&h.ctx)
				if code := h.ctx.Response.StatusCode(); code != tt.wantCode {
					t.Fatalf("answer %d, want %d", code, tt.wantCode)
				}
			}
			for i := 0; i < 10; i++ { // warm fasthttp's pools, the connection and the metric children
				run()
			}
			if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
				t.Errorf("Handler allocates %.2f times per request, want 0", allocs)
			}
		})
	}
}
