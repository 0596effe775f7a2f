package proxy

import (
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/proxy/upstream"
)

// TestHandlerAllocs guards the request path: routing, lease, header rewriting, forwarding on
// the backend's connection pool and metrics together allocate nothing per request once warm (fasthttp
// reuses its buffers; the balancer's own guard covers selection and leases). The measurement
// counts every goroutine, the real backend on 127.0.0.1 included.
func TestHandlerAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race (sync.Pool drops items at random)")
	}
	t.Run("log off", func(t *testing.T) { testHandlerAllocs(t, benchEnv(t)) })
	// The access log on, to a file, with headers of its own: the entry, the record, the line
	// and its hand-off to the writer allocate nothing either.
	t.Run("log on", func(t *testing.T) { testHandlerAllocs(t, benchEnvLogging(t, filepath.Join(t.TempDir(), "access.log"))) })
}

func testHandlerAllocs(t *testing.T, e *env) {
	exhausted := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test", "*.shop.test"}}, {Name: "empty", Hosts: []string{"empty.test"}, Pool: "pool-empty"}}, []configs.Backend{{ID: "b1", Address: e.bal.Snapshot().Config().Backends[0].Address, Capacity: 4096}}, tieBreakID)

	exhausted.Proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	e.bal.Update(exhausted)
	tests := []struct {
		name     string
		host     string
		method   string
		headers  []string
		body     string
		peer     net.IP // the client's address; nil: 127.0.0.1
		wantCode int
	}{
		{name: "plain GET", host: "www.shop.test", method: "GET", wantCode: 200},
		{name: "browser-like GET with hop-by-hop headers and X-Forwarded-For", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"Connection", "keep-alive", "Keep-Alive", "timeout=5", "X-Forwarded-For", "127.0.0.9",
				"X-Forwarded-For", "127.0.0.10", "X-Forwarded-Proto", "https",
				"Cookie", "a=1; b=2", "Accept-Language", "en"}},
		{name: "Connection naming a custom header", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"Connection", "X-Hop", "X-Hop", "1"}},
		{name: "POST with a body", host: "shop.test", method: "POST", body: "name=value&other=1", wantCode: 200},
		{name: "names with underscores dropped", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"X_Forwarded_For", "6.6.6.6", "X-Real_IP", "6.6.6.6", "Accept-Language", "en"}},
		{name: "a header name that is not a token", host: "shop.test", method: "GET", wantCode: 400,
			headers: []string{"Accept-Language", "en", "Foo Bar", "1"}},
		{name: "userinfo in Host", host: "user:pw@shop.test", method: "GET", wantCode: 400},
		{name: "TRACE", host: "shop.test", method: "TRACE", wantCode: 405},
		{name: "no app", host: "other.test", method: "GET", wantCode: 404},
		{name: "pool exhausted", host: "empty.test", method: "GET", wantCode: 503},
		{name: "from a trusted proxy, with X-Forwarded-For, X-Request-Id and traceparent", host: "shop.test", method: "GET",
			peer: net.IPv4(127, 0, 0, 2), wantCode: 200,
			headers: []string{"X-Forwarded-For", "203.0.113.7, 127.0.0.2", "X-Request-Id", "client-id-1",
				"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Referer", "https://shop.test/"}},
		{name: "an invalid X-Request-Id replaced", host: "shop.test", method: "GET", wantCode: 200,
			headers: []string{"X-Request-Id", "has a space"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandlerCall()
			if tt.peer != nil {
				h.ctx.Init(&h.tmpl, &net.TCPAddr{IP: tt.peer, Port: 50000}, nil)
			}
			h.tmpl.Header.SetHost(tt.host)
			h.tmpl.Header.SetMethod(tt.method)
			h.addHeaders(tt.headers)
			h.tmpl.SetBodyString(tt.body)
			run := func() {
				if code := h.serve(e.p); code != tt.wantCode {
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

// TestBodilessAnswerAllocs: an answer without a body (to HEAD, a 204) closes its backend
// connection, so each costs a dial (and the backend an accept), which allocate; but the
// connection's buffers (readBufferSize + writeBufferSize) are reused from the connection
// closed before, so the request allocates far less than one set of them.
func TestBodilessAnswerAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race (sync.Pool drops items at random)")
	}
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/204" {
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return
		}
		ctx.SetBody(body1K)
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"www.shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 4096}}, tieBreakID)

	e := newEnv(t, cfg, "b1")
	for _, tt := range []struct {
		name, method, path string
		wantCode           int
	}{
		{name: "HEAD", method: "HEAD", path: "/", wantCode: 200},
		{name: "204", method: "GET", path: "/204", wantCode: 204},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandlerCall()
			h.tmpl.Header.SetMethod(tt.method)
			h.tmpl.SetRequestURI(tt.path)
			run := func() {
				if code := h.serve(e.p); code != tt.wantCode {
					t.Fatalf("answer %d, want %d", code, tt.wantCode)
				}
			}
			for i := 0; i < 10; i++ {
				run()
			}
			const n = 1000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < n; i++ {
				run()
			}
			runtime.ReadMemStats(&after)
			perRequest := (after.TotalAlloc - before.TotalAlloc) / n
			if limit := uint64(upstream.ReadBufferSize); perRequest >= limit {
				t.Errorf("a %s request allocates %d bytes, want fewer than %d: the connection's buffers are not reused", tt.name, perRequest, limit)
			}
			t.Logf("%s: %.1f allocations, %d bytes per request (backend included)", tt.name, float64(after.Mallocs-before.Mallocs)/n, perRequest)
		})
	}
}

// TestRelayResponseAllocs: stripping a backend's own X-Pollbal-* headers, with hop-by-hop ones,
// allocates nothing.
func TestRelayResponseAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	var tmpl, h fasthttp.ResponseHeader
	tmpl.DisableNormalizing() // as RoundTrip reads it
	tmpl.SetContentLength(2)
	tmpl.Set("X-Pollbal-Reason", "pool_exhausted")
	tmpl.Set("x-pollbal-backend", "someone-else")
	tmpl.Set("Keep-Alive", "timeout=5")
	tmpl.Set("Cache-Control", "no-store")
	run := func() {
		tmpl.CopyTo(&h)
		relayResponse(&h, "b1", "primary", []byte("0123456789abcdef0123456789abcdef"))
	}
	run()
	if h.Peek("X-Pollbal-Reason") != nil || string(h.Peek("X-Pollbal-Backend")) != "b1" || h.Peek("x-pollbal-backend") != nil {
		t.Fatalf("relayed header: %s", h.Header())
	}
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("relayResponse allocates %.2f times", n)
	}
}
