package proxy

import (
	"bufio"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/proxy/upstream"
)

// connBackend is a backend that records the connections its requests came on. "/stall" never
// answers until the test ends; "/trickle" sends its headers and part of a chunked body, then
// stalls; anything else is answered "ok" at once.
type connBackend struct {
	*backend
	mu    sync.Mutex
	conns map[uint64]bool
}

func startConnBackend(t *testing.T) *connBackend {
	release := make(chan struct{})
	cb := &connBackend{conns: map[uint64]bool{}}
	cb.backend = startBackend(t, func(ctx *fasthttp.RequestCtx) {
		cb.mu.Lock()
		cb.conns[ctx.ConnID()] = true
		cb.mu.Unlock()
		switch string(ctx.Path()) {
		case "/stall":
			<-release
		case "/trickle":
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				_, _ = w.WriteString("partial")
				_ = w.Flush()
				<-release
			})
		default:
			ctx.SetBodyString("ok")
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the backend's shutdown
	return cb
}

func (cb *connBackend) connCount() int {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return len(cb.conns)
}

// TestWatchdogTimeout checks that proxy.backend_timeout still holds without per-request
// deadlines: the 504 comes no sooner than the timeout and within two watchdog ticks (plus
// scheduling slack) after it, on a new connection and on a reused keep-alive one; when the
// backend stalls in the middle of a body that is already streaming to the client, the
// client's response is cut as quickly (a 504 can no longer be sent); and the request is not
// retried. The backend never answers, so the lower bound and the reason prove the timeout; the
// slack on the upper bound is for a loaded 2-core machine under -race, where delivering the
// answer alone can take hundreds of milliseconds.
func TestWatchdogTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	const slack = 900 * time.Millisecond
	tests := []struct {
		name      string
		warmup    bool // a quick request first, so the slow one reuses its idle connection
		path      string
		cut       bool // the answer has begun: the client sees it end early instead of a 504
		wantConns int
	}{
		{name: "first request on a new connection", path: "/stall", wantConns: 1},
		{name: "request on a reused keep-alive connection", warmup: true, path: "/stall", wantConns: 1},
		{name: "backend stalls after sending part of the body", warmup: true, path: "/trickle", cut: true, wantConns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow := startConnBackend(t)
			spare := okBackend(t)
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{
				{ID: "a-slow", Address: slow.addr},
				{ID: "b-spare", Address: spare.addr},
			}, tieBreakID)

			cfg.Proxy.BackendTimeout = timeout
			e := newEnv(t, cfg, "a-slow", "b-spare")
			if tt.warmup {
				if r := e.do("GET", "shop.test", "/", ""); r.code != 200 || r.headers["x-pollbal-backend"] != "a-slow" {
					t.Fatalf("warm-up got %v, want 200 from a-slow", r)
				}
			}
			start := time.Now()
			if tt.cut {
				c := dialRaw(t, e.ln, nil).c
				if _, err := io.WriteString(c, "GET "+tt.path+" HTTP/1.1\r\nHost: shop.test\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(c) // until the proxy closes the connection
				if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") ||
					!strings.HasSuffix(string(got), "\r\n\r\n7\r\npartial\r\n") {
					t.Fatalf("client read %q, %v: want the 200 and the partial chunk, then the end", got, err)
				}
			} else {
				r := e.do("GET", "shop.test", tt.path, "")
				if r.code != 504 || r.headers["x-pollbal-reason"] != "backend_timeout" || r.headers["x-pollbal-backend"] != "a-slow" {
					t.Fatalf("got %v, want 504 backend_timeout from a-slow", r)
				}
			}
			elapsed := time.Since(start)
			t.Logf("answered or cut after %v", elapsed)
			if limit := timeout + 2*upstream.WatchdogTick + slack; elapsed < timeout || elapsed > limit {
				t.Errorf("answered after %v, want between %v and %v", elapsed, timeout, limit)
			}
			if n := slow.connCount(); n != tt.wantConns {
				t.Errorf("slow backend saw %d connections, want %d", n, tt.wantConns)
			}
			if n := spare.hits.Load(); n != 0 {
				t.Errorf("timed-out request was retried: spare backend got %d requests", n)
			}
			e.waitIdle()
		})
	}
}

// TestWatchdogKeepsIdleConnections checks that an idle keep-alive backend connection outlives
// the backend timeout by several watchdog scans and is reused by the next request.
func TestWatchdogKeepsIdleConnections(t *testing.T) {
	const timeout = 50 * time.Millisecond
	tests := []struct {
		name     string
		requests int
	}{
		{name: "one idle period", requests: 2},
		{name: "several idle periods", requests: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startConnBackend(t)
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
			cfg.Proxy.BackendTimeout = timeout
			e := newEnv(t, cfg, "b1")
			for i := 0; i < tt.requests; i++ {
				if r := e.do("GET", "shop.test", "/", ""); r.code != 200 {
					t.Fatalf("request %d: got %v", i+1, r)
				}
				// Idle for well past the timeout, over several scans.
				idleSince, scans := time.Now(), e.p.watch.Scans()
				testproc.WaitFor(t, 10*time.Second, "the watchdog to scan past the timeout", func() bool {
					return time.Since(idleSince) > timeout+3*upstream.WatchdogTick && e.p.watch.Scans() >= scans+4
				})
				watched, _ := e.p.watch.Watched()
				if watched != 1 {
					t.Fatalf("after idling, %d backend connections are watched, want 1", watched)
				}
			}
			if r := e.do("GET", "shop.test", "/", ""); r.code != 200 {
				t.Fatalf("last request: got %v", r)
			}
			if n := be.connCount(); n != 1 {
				t.Errorf("backend saw %d connections, want 1 (the idle one closed?)", n)
			}
		})
	}
}
