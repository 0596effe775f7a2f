package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// errorReasons are every reason of pollbal_backend_errors_total.
var errorReasons = []balancer.ErrorReason{balancer.ErrorConnect, balancer.ErrorRefused, balancer.ErrorTimeout, balancer.ErrorReset, balancer.ErrorBadResponse}

// backendErrors is pollbal_backend_errors_total{backend=id,reason}; -1 when the series is absent.
func (e *env) backendErrors(id string, r balancer.ErrorReason) float64 {
	e.t.Helper()
	v, ok := metrictest.Value(e.t, e.balReg, `pollbal_backend_errors_total{backend="`+id+`",reason="`+r.String()+`"}`)
	if !ok {
		return -1
	}
	return v
}

// Every failed forward is counted under its backend and reason: refused (nothing listens),
// reset (the connection closed after the request went out), bad_response (not HTTP) and timeout
// (no answer within backend_timeout). A failure that is not the backend's is not counted.
func TestBackendErrorsByReason(t *testing.T) {
	stall := startStallBackend(t, false)
	hangup, _ := rawBackendAddr(t, "")
	garbage, _ := rawBackendAddr(t, "NOT HTTP AT ALL\r\n\r\n")
	tests := []struct {
		name     string
		addr     string
		wantCode int
		want     balancer.ErrorReason
	}{
		{name: "refused", addr: testproc.FreeAddr(t), wantCode: 502, want: balancer.ErrorRefused},
		{name: "reset", addr: hangup, wantCode: 502, want: balancer.ErrorReset},
		{name: "bad response", addr: garbage, wantCode: 502, want: balancer.ErrorBadResponse},
		{name: "timeout", addr: stall.addr, wantCode: 504, want: balancer.ErrorTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: tt.addr}}, tieBreakID)
			cfg.Proxy.BackendTimeout = 200 * time.Millisecond
			cfg.Proxy.Retries = 0
			e := newEnv(t, cfg, "b1")
			if r := e.do("GET", "shop.test", "/", ""); r.code != tt.wantCode {
				t.Fatalf("got %v, want %d", r, tt.wantCode)
			}
			for _, r := range errorReasons {
				want := 0.0
				if r == tt.want {
					want = 1
				}
				if got := e.backendErrors("b1", r); got != want {
					t.Errorf("pollbal_backend_errors_total{backend=b1,reason=%s} = %v, want %v", r, got, want)
				}
			}
			e.waitIdle()
		})
	}
}

// eject_after counts backend timeouts as well as failed connections: a backend that accepts
// requests and never answers is ejected after eject_after 504s, and its neighbour serves the
// rest. Before, only connection failures counted and such a backend stayed in rotation.
func TestEjectAfterCountsTimeouts(t *testing.T) {
	stall := startStallBackend(t, false)
	spare := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{
		{ID: "a-slow", Address: stall.addr},
		{ID: "b-spare", Address: spare.addr},
	}, tieBreakID)

	cfg.Proxy.BackendTimeout = 200 * time.Millisecond
	cfg.Proxy.EjectAfter = 2
	e := newEnv(t, cfg, "a-slow", "b-spare")
	for i, want := range []struct {
		code    int
		backend string
	}{{504, "a-slow"}, {504, "a-slow"}, {200, "b-spare"}, {200, "b-spare"}} {
		if r := e.do("GET", "shop.test", "/", ""); r.code != want.code || r.headers["x-pollbal-backend"] != want.backend {
			t.Fatalf("request %d: got %v, want %d from %s", i+1, r, want.code, want.backend)
		}
	}
	if !backendOf(t, e.bal, "a-slow").Ejected() {
		t.Error("a-slow not ejected after eject_after timeouts")
	}
	if got := e.backendErrors("a-slow", balancer.ErrorTimeout); got != 2 {
		t.Errorf("a-slow timeouts counted %v, want 2", got)
	}
	if got := spare.hits.Load(); got != 2 {
		t.Errorf("b-spare got %d requests, want 2 (timeouts are never retried)", got)
	}
	e.waitIdle()
}

// With proxy.eject_on_5xx a backend whose answers are 502 (503, 504) is ejected after
// eject_after of them; without it, it keeps every request it is given. A 503 with X-Pool-Full
// is a refusal, never an ejection, whatever the key says. The 502s themselves reach the client.
func TestEjectOn5xx(t *testing.T) {
	bad := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusBadGateway)
		ctx.SetBodyString("upstream of the backend is down\n")
	})
	ok := okBackend(t)
	tests := []struct {
		name       string
		first      string // address of a-first
		ejectOn5xx bool
		want       []int // answers in order
		wantFrom   []string
		ejected    bool
	}{
		{name: "off: the 502s are answers", first: bad.addr, want: []int{502, 502, 502, 502},
			wantFrom: []string{"a-first", "a-first", "a-first", "a-first"}},
		{name: "on: ejected after two 502s", first: bad.addr, ejectOn5xx: true, want: []int{502, 502, 200, 200},
			wantFrom: []string{"a-first", "a-first", "b-ok", "b-ok"}, ejected: true},
		{name: "on: refusals as full never eject", first: fullBackend(t).addr, ejectOn5xx: true, want: []int{200, 200, 200, 200},
			wantFrom: []string{"b-ok", "b-ok", "b-ok", "b-ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{
				{ID: "a-first", Address: tt.first},
				{ID: "b-ok", Address: ok.addr},
			}, tieBreakID)

			cfg.Proxy.EjectAfter = 2
			cfg.Proxy.EjectOn5xx = tt.ejectOn5xx
			e := newEnv(t, cfg, "a-first", "b-ok")
			for i, code := range tt.want {
				r := e.do("GET", "shop.test", "/", "")
				if r.code != code || r.headers["x-pollbal-backend"] != tt.wantFrom[i] {
					t.Fatalf("request %d: got %v, want %d from %s", i+1, r, code, tt.wantFrom[i])
				}
				if code == 502 && r.body != "upstream of the backend is down\n" {
					t.Errorf("request %d: body %q, want the backend's", i+1, r.body)
				}
			}
			if got := backendOf(t, e.bal, "a-first").Ejected(); got != tt.ejected {
				t.Errorf("a-first ejected = %v, want %v", got, tt.ejected)
			}
			for _, r := range errorReasons {
				if got := e.backendErrors("a-first", r); got != 0 {
					t.Errorf("an answer counted as a failed forward: reason %s = %v", r, got)
				}
			}
			e.waitIdle()
		})
	}
}

// responsesTotal is pollbal_responses_total{reason}; -1 when the series is absent.
func (e *env) responsesTotal(reason string) float64 {
	e.t.Helper()
	v, ok := metrictest.Value(e.t, e.reg, `pollbal_responses_total{reason="`+reason+`"}`)
	if !ok {
		return -1
	}
	return v
}

// everyAnswerConfig has an app for each answer a test wants to see: shop on be (b1, capacity
// 1), ghost on a pool without backends, down on a backend nobody listens on (b-down), slow on
// a backend that never answers (b-slow); request bodies past 10 bytes are refused, and a
// backend gets 200 ms to answer. The ready backends are b1, b-down and b-slow.
func everyAnswerConfig(t *testing.T, be *backend) *configs.Config {
	stall := startStallBackend(t, false)
	cfg := configtest.New([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test"}},
		{Name: "ghost", Hosts: []string{"ghost.test"}, Pool: "pool-ghost"},
		{Name: "down", Hosts: []string{"down.test"}, Pool: "pool-down"},
		{Name: "slow", Hosts: []string{"slow.test"}, Pool: "pool-slow"},
	}, []configs.Backend{
		{ID: "b1", Address: be.addr, Capacity: 1},
		{ID: "b-down", Address: testproc.FreeAddr(t), Pool: "pool-down"},
		{ID: "b-slow", Address: stall.addr, Pool: "pool-slow"},
	}, tieBreakID)
	cfg.Proxy.MaxRequestBody = 10
	cfg.Proxy.BufferRequestBody = 10
	cfg.Proxy.BackendTimeout = 200 * time.Millisecond
	return cfg
}

// Every answer pollbal makes itself is counted under its X-Pollbal-Reason, from the handler,
// the server's error handler and the queue; a backend's answers (a 404, and a 502 with an
// X-Pollbal-Reason of its own) are not. Every known reason's series exists from the start.
func TestResponsesByReason(t *testing.T) {
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/404":
			ctx.SetStatusCode(404)
		case "/502":
			ctx.SetStatusCode(502)
			// A backend's word is not pollbal's answer, whatever it claims.
			ctx.Response.Header.Set("X-Pollbal-Reason", reasonBackendTimeout)
		}
		ctx.SetBodyString("backend\n")
	})
	cfg := everyAnswerConfig(t, be)
	cfg.Proxy.QueueTimeout, cfg.Proxy.MaxQueue = 200*time.Millisecond, 1
	e := newEnv(t, cfg, "b1", "b-down", "b-slow")
	for _, reason := range ownReasons() {
		if got := e.responsesTotal(reason); got != 0 {
			t.Errorf("pollbal_responses_total{reason=%q} = %v at the start, want a series at 0", reason, got)
		}
	}

	want := map[string]float64{}
	check := func(r result, code int, reason string) {
		t.Helper()
		if r.code != code || r.headers["x-pollbal-reason"] != reason {
			t.Fatalf("got %v, want %d %s", r, code, reason)
		}
		if reason != "" {
			want[reason]++
		}
	}
	check(e.do("GET", "shop.test", "/", ""), 200, "")
	check(e.do("GET", "shop.test", "/404", ""), 404, "")
	if r := e.do("GET", "shop.test", "/502", ""); r.code != 502 || r.headers["x-pollbal-backend"] != "b1" {
		t.Fatalf("got %v, want the backend's 502", r)
	}
	check(e.do("GET", "nowhere.test", "/", ""), 404, reasonNoApp)
	check(e.do("GET", "ghost.test", "/", ""), 503, reasonPoolExhausted)
	check(e.do("GET", "down.test", "/", ""), 502, reasonBackendUnreachable)
	check(e.do("GET", "slow.test", "/", ""), 504, reasonBackendTimeout)
	check(e.do("POST", "shop.test", "/", "far more than ten bytes"), 413, reasonBodyTooLarge)
	check(rawExchange(t, e.ln, "CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test\r\n\r\n"), 405, reasonMethodNotAllowed)
	check(rawExchange(t, e.ln, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), 400, reasonBadRequest)
	check(rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nno colon here\r\n\r\n"), 400, reasonBadRequest)

	// The queue: b1's only slot held, one request waits and times out, one more finds it full.
	app := e.bal.Snapshot().Route([]byte("shop.test"))
	held, err := e.bal.Acquire(e.bal.Snapshot(), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan result, 1)
	go func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://shop.test/")
		if err := e.newClient().Do(req, resp); err != nil {
			queued <- result{code: -1, body: err.Error()}
			return
		}
		queued <- toResult(resp)
	}()
	testproc.WaitFor(t, 10*time.Second, "a request queued", func() bool { return e.bal.QueueLength("default") == 1 })
	check(e.do("GET", "shop.test", "/", ""), 503, reasonQueueFull)
	check(<-queued, 503, reasonQueueTimeout)
	held.Release()

	for _, reason := range ownReasons() {
		if got := e.responsesTotal(reason); got != want[reason] {
			t.Errorf("pollbal_responses_total{reason=%q} = %v, want %v", reason, got, want[reason])
		}
	}
	e.waitIdle()
}

// ownReasons lists every reason constant of the package, so that a new answer of pollbal's own
// has its pollbal_responses_total series from the start.
func TestOwnReasonsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					found++
					if !slices.Contains(ownReasons(), value) {
						t.Errorf("%s: %s = %q is not in ownReasons", name, id.Name, value)
					}
				}
			}
		}
	}
	if found != len(ownReasons()) {
		t.Errorf("found %d reason constants, ownReasons lists %d", found, len(ownReasons()))
	}
}
