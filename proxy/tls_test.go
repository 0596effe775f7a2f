package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/certs"
	"pollbal/internal/certs/certstest"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
	"pollbal/proxy/upstream"
)

// tlsEnv is an env that also serves TLS on a real 127.0.0.1 listener, with a certificate for
// shop.test.
type tlsEnv struct {
	*env
	addr   string
	client *tls.Config
}

func newTLSEnv(t *testing.T, h fasthttp.RequestHandler, tune func(*configs.Proxy)) *tlsEnv {
	t.Helper()
	e, _ := limitsEnv(t, h, tune)
	return withTLS(t, e)
}

// withTLS adds the TLS listener to e.
func withTLS(t *testing.T, e *env) *tlsEnv {
	t.Helper()
	pair := certstest.Write(t, t.TempDir(), "shop", certstest.Options{}, "shop.test")
	set, err := certs.Load([]configs.Certificate{{CertFile: pair.CertFile, KeyFile: pair.KeyFile}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// env's cleanup shuts the proxy down, which ends ServeTLS.
	go func() {
		_ = e.p.ServeTLS(ln, certs.NewStore(set, tls.VersionTLS12, []string{"http/1.1"}).ServerConfig())
	}()
	return &tlsEnv{env: e, addr: ln.Addr().String(),
		client: &tls.Config{ServerName: "shop.test", RootCAs: certstest.Pool(pair)}}
}

// dialTLS opens a TLS connection to the proxy and completes the handshake.
func (e *tlsEnv) dialTLS(t *testing.T) *rawClient {
	t.Helper()
	c, err := tls.Dial("tcp4", e.addr, e.client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

// echoProto answers with the X-Forwarded-Proto the backend received.
func echoProto(ctx *fasthttp.RequestCtx) {
	ctx.SetBody(ctx.Request.Header.Peek(headerForwardedProto))
}

func TestTLSForwardsWithProtoHTTPS(t *testing.T) {
	e := newTLSEnv(t, echoProto, func(*configs.Proxy) {})
	rc := e.dialTLS(t)
	for i, tc := range []struct{ name, req string }{
		{name: "plain request", req: "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
		{name: "a client's own X-Forwarded-Proto is replaced", req: "GET / HTTP/1.1\r\nHost: shop.test\r\nX-Forwarded-Proto: http\r\n\r\n"},
		{name: "keep-alive: third request on the same connection", req: "GET /x HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
	} {
		if r := rc.exchange(tc.req); r.code != 200 || r.body != "https" {
			t.Errorf("%d %s: %v, want 200 https", i, tc.name, r)
		}
	}
	if st := rc.c.(*tls.Conn).ConnectionState(); st.NegotiatedProtocol != "" && st.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %q, want HTTP/1.1", st.NegotiatedProtocol)
	}
	// The plain listener of the same proxy still says http.
	if r := rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.body != "http" {
		t.Errorf("plain listener: %v, want http", r)
	}
}

// A client offering h2 gets HTTP/1.1: pollbal speaks HTTP/1.1 over TLS.
func TestTLSOffersOnlyHTTP11(t *testing.T) {
	e := newTLSEnv(t, echoProto, func(*configs.Proxy) {})
	conf := e.client.Clone()
	conf.NextProtos = []string{"h2", "http/1.1"}
	c, err := tls.Dial("tcp4", e.addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", p)
	}
}

// The handshake is part of the header phase: a client that connects and never completes it is
// cut after header_timeout (with no 408: there is no TLS to write it in).
func TestTLSHandshakeWithinHeaderTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	e := newTLSEnv(t, echoProto, func(p *configs.Proxy) { p.HeaderTimeout = limit })
	// Timed from before the dial: the connection's clock starts when pollbal accepts it, later.
	start := time.Now()
	c, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantSilentClose(t, "connection without a handshake", c, c, start, limit)
	if n := testutil.ToFloat64(e.p.connMetrics.headerTimeouts); n != 1 {
		t.Errorf("header timeouts counted %v, want 1", n)
	}
	// A handshake that did not finish in time, not a request answered 408.
	if n := testutil.ToFloat64(e.p.connMetrics.tlsHandshakeErrors); n != 1 {
		t.Errorf("TLS handshake errors counted %v, want 1", n)
	}
	wantNoRequestCounted(t, e.reg, "the cut handshake")
}

// After the handshake, late headers get the 408 as on plain HTTP, over TLS.
func TestTLSHeaderTimeoutAnswers408(t *testing.T) {
	const limit = 200 * time.Millisecond
	e := newTLSEnv(t, echoProto, func(p *configs.Proxy) { p.HeaderTimeout = limit })
	rc := e.dialTLS(t)
	start := time.Now()
	if _, err := rc.c.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || resp.Header.Get(headerReason) != reasonRequestTimeout {
		t.Errorf("answer %d %q, want 408 request_timeout", resp.StatusCode, body)
	}
	// The clock runs from the connection's start, handshake included.
	if elapsed := time.Since(start); elapsed > limit+time.Second {
		t.Errorf("408 after %s, want within %s", elapsed, limit+time.Second)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="-",code="408"}`); got != 1 {
		t.Errorf(`pollbal_requests_total{app="-",code="408"} = %v, want 1`, got)
	}
	if got := e.responsesTotal(reasonRequestTimeout); got != 1 {
		t.Errorf(`pollbal_responses_total{reason="request_timeout"} = %v, want 1`, got)
	}
	if n := testutil.ToFloat64(e.p.connMetrics.tlsHandshakeErrors); n != 0 {
		t.Errorf("TLS handshake errors counted %v after a good handshake, want 0", n)
	}
}

// A failed TLS handshake is not a request: a client speaking plain HTTP to the TLS listener and
// one that does not trust the certificate are counted in pollbal_tls_handshake_errors_total,
// not as requests answered 400. A connection closed
// before sending a byte made no handshake, and one that completes its handshake is served.
func TestTLSHandshakeErrorsAreNotRequests(t *testing.T) {
	e := newTLSEnv(t, echoProto, func(*configs.Proxy) {})
	handshakeErrors := func() float64 { return testutil.ToFloat64(e.p.connMetrics.tlsHandshakeErrors) }

	plain, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, plain, plain)
	testproc.WaitFor(t, 10*time.Second, "the plain-HTTP handshake counted", func() bool { return handshakeErrors() == 1 })

	untrusting := e.client.Clone()
	untrusting.RootCAs = nil // the system roots: the test's certificate is not among them
	if c, err := tls.Dial("tcp4", e.addr, untrusting); err == nil {
		c.Close()
		t.Fatal("a client that does not trust the certificate completed its handshake")
	}
	testproc.WaitFor(t, 10*time.Second, "the refused certificate counted", func() bool { return handshakeErrors() == 2 })

	silent, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, 10*time.Second, "the silent connection accepted", func() bool { return e.p.open.Load() == 1 })
	_ = silent.Close()
	testproc.WaitFor(t, 10*time.Second, "every connection gone", func() bool { return e.p.open.Load() == 0 })
	if got := handshakeErrors(); got != 2 {
		t.Errorf("TLS handshake errors = %v after a connection that sent nothing, want still 2", got)
	}

	if r := e.dialTLS(t).exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 || r.body != "https" {
		t.Errorf("a good client after them: %v", r)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="-",code="400"}`); got != 0 {
		t.Errorf(`pollbal_requests_total{app="-",code="400"} = %v, want 0`, got)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="shop",code="200"}`); got != 1 {
		t.Errorf(`pollbal_requests_total{app="shop",code="200"} = %v, want 1`, got)
	}
	if got := e.responsesTotal(reasonBadRequest); got != 0 {
		t.Errorf(`pollbal_responses_total{reason="bad_request"} = %v, want 0`, got)
	}
	if got := handshakeErrors(); got != 2 {
		t.Errorf("TLS handshake errors = %v after a good handshake, want still 2", got)
	}
}

// TLS connections count towards max_connections, and leave the count when they close.
func TestTLSMaxConnections(t *testing.T) {
	e := newTLSEnv(t, echoProto, func(p *configs.Proxy) { p.MaxConnections = 2 })
	req := "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"
	first := e.dialTLS(t)
	if r := first.exchange(req); r.code != 200 {
		t.Fatalf("first: %v", r)
	}
	plain := dialRaw(t, e.ln, nil)
	if r := plain.exchange(req); r.code != 200 {
		t.Fatalf("plain: %v", r)
	}
	// Over the limit: accepted by the kernel, closed at once by pollbal, so the handshake fails.
	if c, err := tls.Dial("tcp4", e.addr, e.client); err == nil {
		c.Close()
		t.Error("a third connection completed its handshake with max_connections 2")
	}
	if n := testutil.ToFloat64(e.p.connMetrics.refused); n != 1 {
		t.Errorf("refused connections counted %v, want 1", n)
	}
	_ = first.c.Close()
	testproc.WaitFor(t, 10*time.Second, "the closed TLS connection to leave the count", func() bool { return e.p.open.Load() == 1 })
	if r := e.dialTLS(t).exchange(req); r.code != 200 || !strings.Contains(r.body, "https") {
		t.Errorf("after a connection closed: %v", r)
	}
}

// An idle keep-alive TLS connection is closed after idle_timeout.
func TestTLSIdleTimeout(t *testing.T) {
	const limit = 200 * time.Millisecond
	e := newTLSEnv(t, echoProto, func(p *configs.Proxy) { p.IdleTimeout = limit })
	rc := e.dialTLS(t)
	// Timed from before the request: the idle clock starts once the answer is written, later.
	start := time.Now()
	if r := rc.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 {
		t.Fatalf("request: %v", r)
	}
	wantSilentClose(t, "idle TLS connection", rc.c, rc.br, start, limit)
	if n := testutil.ToFloat64(e.p.connMetrics.idleTimeouts); n != 1 {
		t.Errorf("idle timeouts counted %v, want 1", n)
	}
}

// A TLS client that closes its connection (close_notify, then FIN) while its request is being
// forwarded ends the forward within a second, as a plain one does: the close_notify bytes
// waiting on the socket must not pass for a client that is still there.
func TestTLSClientGoneEndsForward(t *testing.T) {
	sb := startStallBackend(t, false)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b2", Address: sb.addr}}, tieBreakID)
	e := withTLS(t, newEnv(t, cfg, "b2"))
	rc := e.dialTLS(t)
	if _, err := rc.c.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-sb.arrived
	b2 := backendOf(t, e.bal, "b2")
	if n := b2.InFlight(); n != 1 {
		t.Fatalf("in flight = %d, want 1", n)
	}
	start := time.Now()
	_ = rc.c.Close() // sends close_notify first
	testproc.WaitFor(t, 10*time.Second, "the lease to be released", func() bool { return b2.InFlight() == 0 })
	released := time.Since(start)
	backendClosed := (<-sb.closed).Sub(start)
	if released > time.Second || backendClosed > time.Second {
		t.Errorf("forward ended %v / %v after the TLS client left, want within 1s", released, backendClosed)
	}
}

// The client check leaves alone a TLS client that is still there while its backend takes
// several checks to answer.
func TestTLSClientCheckIgnoresLiveClients(t *testing.T) {
	e := newTLSEnv(t, func(ctx *fasthttp.RequestCtx) {
		deadline := time.NewTimer(5 * upstream.ClientCheckEvery * upstream.WatchdogTick)
		<-deadline.C
		ctx.SetBodyString("late but fine")
	}, func(*configs.Proxy) {})
	if r := e.dialTLS(t).exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 || r.body != "late but fine" {
		t.Fatalf("got %v, want 200 late but fine", r)
	}
}

// Shutdown closes quiet TLS connections at once (an idle keep-alive, one still in its
// handshake) and lets one with a request in flight finish with Connection: close.
func TestTLSShutdown(t *testing.T) {
	g := newSlowGate()
	e := newTLSEnv(t, g.handle, func(*configs.Proxy) {})
	inFlight := e.dialTLS(t)
	g.sendSlow(t, inFlight)
	idle := e.dialTLS(t)
	if r := idle.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); r.code != 200 {
		t.Fatalf("idle connection's request: %v", r)
	}
	handshaking, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer handshaking.Close()
	testproc.WaitFor(t, 10*time.Second, "three connections open", func() bool { return e.p.open.Load() == 3 })

	shutdownInFlight(t, e.p, g, inFlight, func() {
		if elapsed, _ := waitClosed(t, idle.c, idle.br); elapsed > time.Second {
			t.Errorf("idle TLS connection closed after %s, want at once", elapsed)
		}
		if elapsed, _ := waitClosed(t, handshaking, handshaking); elapsed > time.Second {
			t.Errorf("connection in its handshake closed after %s, want at once", elapsed)
		}
	})
}

// A WebSocket upgrade works over TLS: the 101 and the echoed bytes go through the TLS
// connection, the lease is held while it is open and released when the client closes.
func TestTLSUpgrade(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: wsBackendAddr(t)}}, tieBreakID)
	e := withTLS(t, newEnv(t, cfg, "b1"))
	b := backendOf(t, e.bal, "b1")
	rc := e.dialTLS(t)
	if _, err := rc.c.Write([]byte(wsHandshake)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("answer %d %v, want the backend's 101", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"first", "hello over tls"} {
		if msg != "first" {
			if _, err := rc.c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(rc.br, got); err != nil || string(got) != msg {
			t.Fatalf("read %q, %v; want %q", got, err, msg)
		}
	}
	if n := b.InFlight(); n != 1 {
		t.Errorf("in flight %d while upgraded, want 1", n)
	}
	_ = rc.c.Close()
	testproc.WaitFor(t, 10*time.Second, "lease released after the TLS client closed", func() bool { return b.InFlight() == 0 })
}
