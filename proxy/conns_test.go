package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/proxy/clientconn"
)

// limitsEnv is an env whose proxy settings tune sets (timeouts, connection limit).
func limitsEnv(t *testing.T, h fasthttp.RequestHandler, tune func(*configs.Proxy)) (*env, *backend) {
	t.Helper()
	be := startBackend(t, h)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	tune(&cfg.Proxy)
	return newEnv(t, cfg, "b1"), be
}

// waitClosed reads c until the proxy closes it (within 5 s) and returns how long that took and
// what was read.
func waitClosed(t *testing.T, c net.Conn, r io.Reader) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("connection not closed by the proxy: %v (read %q)", err, b)
	}
	return time.Since(start), string(b)
}

// wantSilentClose reads c (through r) until the proxy closes it, and checks that nothing came
// before the close and that the close came between limit and limit + 1 s after start.
func wantSilentClose(t *testing.T, what string, c net.Conn, r io.Reader, start time.Time, limit time.Duration) {
	t.Helper()
	_, rest := waitClosed(t, c, r)
	elapsed := time.Since(start)
	if rest != "" {
		t.Errorf("%s got %q, want a silent close", what, rest)
	}
	if elapsed < limit || elapsed > limit+time.Second {
		t.Errorf("%s closed after %s, want between %s and %s", what, elapsed, limit, limit+time.Second)
	}
}

func TestHeaderTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	tests := []struct {
		name string
		sent string
	}{
		{name: "half-sent headers (slowloris)", sent: "GET / HTTP/1.1\r\nHost: shop.test\r\nX-A: 1\r\n"},
		{name: "connection opened, nothing sent", sent: ""},
		{name: "bare LF line endings", sent: "GET / HTTP/1.1\nHost: shop.test\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, be := limitsEnv(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, func(p *configs.Proxy) { p.HeaderTimeout = limit })
			// Timed from before the dial: the connection's clock starts when the proxy accepts
			// it, later (from after the dial a preempted test saw 196ms against 200ms).
			start := time.Now()
			rc := dialRaw(t, e.ln, nil)
			if _, err := rc.c.Write([]byte(tt.sent)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(rc.br, nil)
			if err != nil {
				t.Fatal(err)
			}
			elapsed := time.Since(start)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 408 || resp.Header.Get(headerReason) != reasonRequestTimeout || !resp.Close {
				t.Errorf("answer %d %q reason %q close=%v, want 408 request_timeout with Connection: close", resp.StatusCode, body, resp.Header.Get(headerReason), resp.Close)
			}
			if elapsed < limit || elapsed > limit+time.Second {
				t.Errorf("408 after %s, want between %s and %s", elapsed, limit, limit+time.Second)
			}
			if _, rest := waitClosed(t, rc.c, rc.br); rest != "" {
				t.Errorf("after the 408: %q", rest)
			}
			if n := testutil.ToFloat64(e.p.connMetrics.headerTimeouts); n != 1 {
				t.Errorf("header timeouts counted %v, want 1", n)
			}
			if be.hits.Load() != 0 {
				t.Error("the backend got the unfinished request")
			}
		})
	}
}

// Normal requests on other connections are not slowed by connections waiting to be cut.
func TestHeaderTimeoutSparesCompleteRequests(t *testing.T) {
	e, _ := limitsEnv(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, func(p *configs.Proxy) { p.HeaderTimeout = 100 * time.Millisecond })
	slow := dialRaw(t, e.ln, nil)
	if _, err := slow.c.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	// A keep-alive client whose requests each arrive whole keeps its connection across many
	// header timeouts' worth of time.
	rc := dialRaw(t, e.ln, nil)
	deadline := time.Now().Add(400 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		if r := rc.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 {
			t.Fatalf("request %d: %v", n, r)
		}
	}
	if _, got := waitClosed(t, slow.c, slow.br); !strings.HasPrefix(got, "HTTP/1.1 408") {
		t.Errorf("slow connection got %q, want a 408", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	e, _ := limitsEnv(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, func(p *configs.Proxy) { p.IdleTimeout = limit })
	rc := dialRaw(t, e.ln, nil)
	// Timed from before the request: the idle clock starts once the answer is written, later.
	start := time.Now()
	if r := rc.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 || r.headers["connection"] == "close" {
		t.Fatalf("first request: %v", r)
	}
	wantSilentClose(t, "idle connection", rc.c, rc.br, start, limit)
	if n := testutil.ToFloat64(e.p.connMetrics.idleTimeouts); n != 1 {
		t.Errorf("idle timeouts counted %v, want 1", n)
	}
}

func TestClientTimeoutCutsStalledBody(t *testing.T) {
	const limit = 200 * time.Millisecond
	e, be := limitsEnv(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, func(p *configs.Proxy) {
		p.ClientTimeout = limit
		p.HeaderTimeout = time.Minute // the body is not the headers' business
	})
	rc := dialRaw(t, e.ln, nil)
	// Timed from before the write: the stall's clock starts when the proxy's read of the body
	// blocks, later.
	start := time.Now()
	if _, err := rc.c.Write([]byte("POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 100\r\n\r\n0123456789")); err != nil {
		t.Fatal(err)
	}
	wantSilentClose(t, "stalled client", rc.c, rc.br, start, limit)
	if n := testutil.ToFloat64(e.p.connMetrics.clientTimeouts); n != 1 {
		t.Errorf("client timeouts counted %v, want 1", n)
	}
	if be.hits.Load() != 0 {
		t.Error("the backend got the unfinished request")
	}
}

// A slow backend is not a slow client: client_timeout does not cut a request waiting on it.
func TestClientTimeoutSparesSlowBackend(t *testing.T) {
	const limit = 100 * time.Millisecond
	e, _ := limitsEnv(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(5 * limit) // the backend's own slowness, the subject of the test
		ctx.SetBodyString("slow")
	}, func(p *configs.Proxy) { p.ClientTimeout, p.HeaderTimeout = limit, limit })
	if r := rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 || r.body != "slow" {
		t.Fatalf("answer %v, want 200 slow", r)
	}
}

// slowGate is a backend handler that holds each request for /slow until the gate opens and
// answers every other request at once.
type slowGate struct {
	arrived chan struct{}
	gate    chan struct{}
}

func newSlowGate() *slowGate {
	return &slowGate{arrived: make(chan struct{}, 1), gate: make(chan struct{})}
}

func (g *slowGate) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/slow" {
		g.arrived <- struct{}{}
		<-g.gate
	}
	ctx.SetBodyString("done")
}

// sendSlow sends a request for /slow on rc and returns once the backend holds it.
func (g *slowGate) sendSlow(t *testing.T, rc *rawClient) {
	t.Helper()
	if _, err := rc.c.Write([]byte("GET /slow HTTP/1.1\r\nHost: shop.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-g.arrived
}

// shutdownInFlight runs p.Shutdown while inFlight's request for /slow waits at g, and calls
// quiet meanwhile to check the connections that must close at once. Shutdown must not return
// while the request is in flight; once the gate opens, the request gets its 200 with
// Connection: close and Shutdown returns nil.
func shutdownInFlight(t *testing.T, p *Proxy, g *slowGate, inFlight *rawClient, quiet func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Shutdown(ctx) }()
	quiet()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}
	close(g.gate)
	resp, err := http.ReadResponse(inFlight.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("in-flight answer %d close=%v, want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// Shutdown closes the connections without a request in flight within a second: one with
// half-sent headers at once, an idle keep-alive once it has been idle for drainGrace.
func TestShutdownClosesQuietConnections(t *testing.T) {
	g := newSlowGate()
	e, _ := limitsEnv(t, g.handle, func(*configs.Proxy) {})
	inFlight := dialRaw(t, e.ln, nil)
	g.sendSlow(t, inFlight)
	idle := dialRaw(t, e.ln, nil)
	if r := idle.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 {
		t.Fatalf("idle connection's request: %v", r)
	}
	halfSent := dialRaw(t, e.ln, nil)
	if _, err := halfSent.c.Write([]byte("GET / HTTP/1.1\r\nHost: shop")); err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 10*time.Second, "three connections open", func() bool { return e.p.open.Load() == 3 })

	shutdownInFlight(t, e.p, g, inFlight, func() {
		for name, rc := range map[string]*rawClient{"idle keep-alive": idle, "half-sent headers": halfSent} {
			if elapsed, rest := waitClosed(t, rc.c, rc.br); rest != "" || elapsed > time.Second {
				t.Errorf("%s connection: closed after %s with %q, want a silent close within 1 s", name, elapsed, rest)
			}
		}
	})
}

// Regression: a shutdown (or the end of a binary upgrade) closed idle keep-alive connections at
// once, and a client at full speed, whose next request was already on its way, got a reset
// instead of an answer. A keep-alive connection that sends its next request within drainGrace
// of the shutdown gets it answered, with Connection: close, and is closed after the answer.
func TestShutdownAnswersAKeepAliveClientsNextRequest(t *testing.T) {
	g := newSlowGate()
	e, _ := limitsEnv(t, g.handle, func(*configs.Proxy) {})
	inFlight := dialRaw(t, e.ln, nil)
	g.sendSlow(t, inFlight)
	ka := dialRaw(t, e.ln, nil)
	const req = "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"
	if r := ka.exchange(req); r.code != 200 || r.headers["connection"] == "close" {
		t.Fatalf("answer before the shutdown: %v, want 200 kept alive", r)
	}
	shutdownInFlight(t, e.p, g, inFlight, func() {
		testproc.WaitFor(t, 10*time.Second, "the listener to stop accepting", func() bool {
			c, err := e.ln.Dial()
			if err == nil {
				_ = c.Close()
			}
			return err != nil
		})
		if r := ka.exchange(req); r.code != 200 || r.headers["connection"] != "close" {
			t.Errorf("next request during the shutdown: %v, want 200 with Connection: close", r)
		}
		if _, rest := waitClosed(t, ka.c, ka.br); rest != "" {
			t.Errorf("after the answer with Connection: close: %q, want the connection closed", rest)
		}
	})
}

func TestMaxConnections(t *testing.T) {
	e, _ := limitsEnv(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }, func(p *configs.Proxy) { p.MaxConnections = 2 })
	req := "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"
	first, second := dialRaw(t, e.ln, nil), dialRaw(t, e.ln, nil)
	for _, rc := range []*rawClient{first, second} {
		if r := rc.exchange(req); r.code != 200 {
			t.Fatalf("request within the limit: %v", r)
		}
	}
	over := dialRaw(t, e.ln, nil)
	_, _ = over.c.Write([]byte(req)) // may fail: the proxy may have closed it already
	if _, rest := waitClosed(t, over.c, over.br); rest != "" {
		t.Errorf("connection over the limit got %q, want a close", rest)
	}
	if n := testutil.ToFloat64(e.p.connMetrics.refused); n != 1 {
		t.Errorf("refused connections counted %v, want 1", n)
	}
	_ = first.c.Close()
	testproc.WaitFor(t, 10*time.Second, "the closed connection to leave the count", func() bool { return e.p.open.Load() == 1 })
	if r := rawExchange(t, e.ln, req); r.code != 200 {
		t.Errorf("request after a connection closed: %v", r)
	}
}

// failingListener fails its first fails Accepts as a process out of descriptors does.
type failingListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Regression: an Accept failing with EMFILE ended Serve, and the process exited.
func TestAcceptErrorsDoNotStopServing(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	p, err := New(Options{Balancer: e.bal, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	inner := fasthttputil.NewInmemoryListener()
	ln := &failingListener{Listener: inner}
	ln.fails.Store(5)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	c, err := inner.Dial()
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, c: c, br: bufio.NewReader(c)}
	if r := rc.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 {
		t.Errorf("answer after failed accepts: %v", r)
	}
	if n := testutil.ToFloat64(p.connMetrics.acceptErrors); n != 5 {
		t.Errorf("accept errors counted %v, want 5", n)
	}
	_ = c.Close()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve = %v, want nil after Shutdown", err)
	}
}

// The stream forwarding looks at the client's socket itself: the tracked connection exposes it.
func TestClientConnExposesSocket(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, nil, tieBreakID)
	e := newEnv(t, cfg)
	c, _ := acceptClient(t, e.p)
	defer c.Close()
	if _, ok := c.NetConn().(*net.TCPConn); !ok {
		t.Errorf("NetConn is %T, want *net.TCPConn", c.NetConn())
	}
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := raw.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Errorf("raw conn control: fd %d, %v", fd, err)
	}
	pipe, _ := net.Pipe()
	defer pipe.Close()
	if _, err := (&clientconn.Conn{Conn: pipe}).SyscallConn(); !errors.Is(err, clientconn.ErrNoRawConn) {
		t.Errorf("SyscallConn of an in-memory conn = %v, want ErrNoRawConn", err)
	}
}
