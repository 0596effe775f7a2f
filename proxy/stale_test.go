package proxy

import (
	"net"
	"net/http"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// Regression: fasthttp kept idle backend connections for 10 s, longer than common backends
// keep them (Node.js and Apache: 5 s), so the next request after a pause went out on a
// connection the backend had closed: 502 backend_unreachable and a step towards ejection,
// although the backend was fine. pollbal now closes them first: here the backend would wait
// 3 s, and pollbal's idle close must come before it, every time.
func TestIdleBackendConnectionsClosedBeforeTheBackendDoes(t *testing.T) {
	closed := make(chan struct{}, 16)
	srv := &http.Server{
		IdleTimeout: 3 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}),
	}
	start := make(chan time.Time, 16)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateIdle:
			start <- time.Now()
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: ln.Addr().String(), Capacity: 4}}, tieBreakID)

	cfg.Proxy.Retries = 0
	e := newEnv(t, cfg, "b1")
	for i := 0; i < 2; i++ {
		if r := e.do("GET", "www.test", "/", ""); r.code != 200 {
			t.Fatalf("request %d: %v, want 200", i, r)
		}
		idleSince := <-start
		select {
		case <-closed:
			if d := time.Since(idleSince); d >= srv.IdleTimeout {
				t.Fatalf("the idle connection was closed after %s: by the backend, not by pollbal", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the idle connection was never closed")
		}
	}
}

// Regression: an HTTP/1.0 request without Host was answered 502 bad_response (fasthttp
// refused to send it to the backend as HTTP/1.1 without a Host), blaming a backend that never
// saw it.
func TestHTTP10WithoutHost(t *testing.T) {
	ok := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: ok.addr}}, tieBreakID)

	e := newEnv(t, cfg, "b1")
	r := rawExchange(t, e.ln, "GET /nohost HTTP/1.0\r\n\r\n")
	if r.code != 200 || r.headers["x-pollbal-backend"] != "b1" {
		t.Fatalf("HTTP/1.0 without Host: %v, want 200 from b1", r)
	}
}
