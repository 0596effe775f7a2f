package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/alarms"
	"pollbal/internal/testproc"
	"pollbal/protocol"
	"pollbal/proxy/clientconn"
)

// tieBreakID makes the balancer rank equal backends by id, so a test knows which is tried
// first. Every proxy test's configuration takes it: configtest.New(apps, backends, tieBreakID).
func tieBreakID(c *configs.Config) { c.Proxy.TieBreak = configs.TieBreakID }

func boolp(b bool) *bool { return &b }

// markReady reports the backends ready and serving "web".
func markReady(bal *balancer.Balancer, ids ...string) {
	for _, id := range ids {
		bal.Observe(balancer.Observation{ID: id, Ready: true, Checked: time.Now(),
			Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}})
	}
}

// backend is a real fasthttp server on 127.0.0.1 that counts the requests it received.
type backend struct {
	addr string
	hits atomic.Int64
}

func startBackend(t testing.TB, h fasthttp.RequestHandler) *backend {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: ln.Addr().String()}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			b.hits.Add(1)
			h(ctx)
		},
		DisableHeaderNamesNormalizing: true, // so a test can send lowercase header names
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.ShutdownWithContext(ctx)
		<-done
	})
	return b
}

// okBackend answers every request 200 "ok".
func okBackend(t testing.TB) *backend {
	return startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") })
}

// rawBackendAddr returns a 127.0.0.1 address whose server reads one request per connection,
// writes reply (nothing when empty) and closes the connection: the request was sent, but no
// usable response came.
func rawBackendAddr(t testing.TB, reply string) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	return testproc.ServeLocal(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		hits.Add(1)
		if reply != "" {
			_, _ = c.Write([]byte(reply))
		}
	}), hits
}

// acceptClient dials a real TCP connection on 127.0.0.1 through p's listener and returns the
// tracked connection p accepted and the client's end of it. The listener and the client's end
// are closed when the test ends.
func acceptClient(t *testing.T, p *Proxy) (*clientconn.Conn, net.Conn) {
	t.Helper()
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := clientconn.NewListener(tcp, nil, &p.clientHooks)
	t.Cleanup(func() { _ = l.Close() })
	dialed, err := net.Dial("tcp4", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dialed.Close() })
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return nc.(*clientconn.Conn), dialed
}

// serveTCP serves e's proxy on a real TCP listener on 127.0.0.1 as well, until the test ends,
// and returns its address: for the checks that need the client's socket itself.
func (e *env) serveTCP(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.p.Serve(ln) }()
	t.Cleanup(func() { _ = ln.Close(); <-served })
	return ln.Addr().String()
}

// env is a proxy serving on an in-memory listener in front of a balancer.
type env struct {
	t      testing.TB
	bal    *balancer.Balancer
	alarms *alarms.Notifier     // the balancer's Observer: pool_exhausted and pool_fallback, deduplicated, in its events
	balReg *prometheus.Registry // the balancer's metrics
	reg    *prometheus.Registry // the proxy's metrics
	p      *Proxy
	ln     *fasthttputil.InmemoryListener
	client *fasthttp.HostClient
	served chan error // Serve's result
}

func newEnv(t testing.TB, cfg *configs.Config, ready ...string) *env {
	t.Helper()
	return newEnvLogging(t, cfg, nil, ready...)
}

// newEnvLogging is newEnv with an access log (nil: none).
func newEnvLogging(t testing.TB, cfg *configs.Config, alog *accesslog.Logger, ready ...string) *env {
	t.Helper()
	balReg := prometheus.NewRegistry()
	notifier, err := alarms.New(alarms.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Close)
	bal, err := balancer.New(balancer.Options{Config: cfg, Registerer: balReg, Observer: notifier, Events: notifier.Events()})
	if err != nil {
		t.Fatal(err)
	}
	markReady(bal, ready...)
	reg := prometheus.NewRegistry()
	p, err := New(Options{Balancer: bal, Registerer: reg, AccessLog: alog})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, bal: bal, alarms: notifier, balReg: balReg, reg: reg, p: p, ln: fasthttputil.NewInmemoryListener(), served: make(chan error, 1)}
	e.client = e.newClient()
	go func() { e.served <- p.Serve(e.ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-e.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return e
}

func (e *env) newClient() *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      "proxy",
		Dial:                      func(string) (net.Conn, error) { return e.ln.Dial() },
		MaxIdemponentCallAttempts: 1,
		DisablePathNormalizing:    true,
		ReadTimeout:               20 * time.Second,
		MaxConns:                  1024,
	}
}

// result is what a test needs from one response.
type result struct {
	code    int
	body    string
	headers map[string]string // lower-case name → value
}

func (r result) String() string {
	return fmt.Sprintf("%d %q %v", r.code, r.body, r.headers)
}

// do sends one request through the proxy. headers are name, value pairs.
func (e *env) do(method, host, path, body string, headers ...string) result {
	e.t.Helper()
	return doWith(e.t, e.client, method, host, path, body, headers...)
}

func doWith(t testing.TB, c *fasthttp.HostClient, method, host, path, body string, headers ...string) result {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + host + path)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	if body != "" {
		req.SetBodyString(body)
	}
	if err := c.Do(req, resp); err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	return toResult(resp)
}

func toResult(resp *fasthttp.Response) result {
	r := result{code: resp.StatusCode(), body: string(resp.Body()), headers: map[string]string{}}
	for k, v := range resp.Header.All() {
		r.headers[strings.ToLower(string(k))] = string(v)
	}
	return r
}

// backendOf returns the runtime backend with the given id.
func backendOf(t testing.TB, bal *balancer.Balancer, id string) *balancer.Backend {
	t.Helper()
	for _, b := range bal.Snapshot().Backends() {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no backend %s", id)
	return nil
}

// waitIdle waits until no lease is held on any backend.
func (e *env) waitIdle() {
	e.t.Helper()
	testproc.WaitFor(e.t, 10*time.Second, "every lease to be released", func() bool {
		for _, b := range e.bal.Snapshot().Backends() {
			if b.InFlight() != 0 {
				return false
			}
		}
		return true
	})
}

// rawClient speaks raw HTTP/1.1 to the proxy over one in-memory connection, so tests see
// exactly which headers cross it.
type rawClient struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

// dialRaw connects from local (a simulated 127.0.0.1 client address; nil for none).
func dialRaw(t testing.TB, ln *fasthttputil.InmemoryListener, local net.Addr) *rawClient {
	t.Helper()
	var (
		c   net.Conn
		err error
	)
	if local != nil {
		c, err = ln.DialWithLocalAddr(local)
	} else {
		c, err = ln.Dial()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

// exchange writes raw and reads one response. The result's headers include
// "transfer-encoding" when the response was chunked, and "connection: close" when the proxy
// will close the connection.
func (rc *rawClient) exchange(raw string) result {
	rc.t.Helper()
	if _, err := rc.c.Write([]byte(raw)); err != nil {
		rc.t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		rc.t.Fatal(err)
	}
	r := result{code: resp.StatusCode, body: string(body), headers: map[string]string{}}
	for k, v := range resp.Header {
		r.headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	if len(resp.TransferEncoding) > 0 {
		r.headers["transfer-encoding"] = strings.Join(resp.TransferEncoding, ", ")
	}
	if resp.Close {
		r.headers["connection"] = "close"
	}
	return r
}

// rawExchange sends one raw request on a new connection.
func rawExchange(t testing.TB, ln *fasthttputil.InmemoryListener, raw string) result {
	t.Helper()
	return dialRaw(t, ln, nil).exchange(raw)
}
