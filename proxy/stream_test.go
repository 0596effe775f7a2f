package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
	"pollbal/proxy/upstream"
)

func TestPlanRequestBody(t *testing.T) {
	tests := []struct {
		name          string
		length        int
		buffer, limit int
		want          bodyPlan
	}{
		{name: "no body", length: 0, buffer: 100, limit: 1000, want: bodyBuffered},
		{name: "at the buffer limit", length: 100, buffer: 100, limit: 1000, want: bodyBuffered},
		{name: "over the buffer limit", length: 101, buffer: 100, limit: 1000, want: bodyStreamed},
		{name: "at the body limit", length: 1000, buffer: 100, limit: 1000, want: bodyStreamed},
		{name: "over the body limit", length: 1001, buffer: 100, limit: 1000, want: bodyTooLarge},
		{name: "no body limit", length: 1 << 40, buffer: 100, limit: 0, want: bodyStreamed},
		{name: "buffering off", length: 1, buffer: 0, limit: 1000, want: bodyStreamed},
		{name: "chunked: length unknown", length: -1, buffer: 100, limit: 1000, want: bodyProbe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planRequestBody(tt.length, tt.buffer, tt.limit); got != tt.want {
				t.Errorf("planRequestBody(%d, %d, %d) = %d, want %d", tt.length, tt.buffer, tt.limit, got, tt.want)
			}
		})
	}
}

// pattern is n bytes of a repeating pattern, generated on demand.
type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off == p.n {
		return 0, io.EOF
	}
	k := int64(len(b))
	if k > p.n-p.off {
		k = p.n - p.off
	}
	for i := range b[:k] {
		b[i] = byte('a' + (p.off+int64(i))%26)
	}
	p.off += k
	return int(k), nil
}

func patternBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = io.ReadFull(&pattern{n: int64(n)}, b)
	return b
}

func TestStreamedResponse(t *testing.T) {
	const size = 8 << 20
	big := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		n := int64(size)
		if ctx.QueryArgs().Has("chunked") {
			ctx.SetBodyStream(&pattern{n: n}, -1)
			return
		}
		ctx.SetBodyStream(&pattern{n: n}, size)
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: big.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	want := patternBytes(size)
	for _, path := range []string{"/blob", "/blob?chunked", "/blob"} {
		r := e.do("GET", "shop.test", path, "")
		if r.code != 200 || r.body != string(want) || r.headers["x-pollbal-backend"] != "b1" {
			t.Fatalf("%s: got %d, %d bytes, headers %v", path, r.code, len(r.body), r.headers)
		}
		if path == "/blob" && r.headers["content-length"] != strconv.Itoa(size) {
			t.Errorf("%s: Content-Length %q, want %d", path, r.headers["content-length"], size)
		}
	}
	e.waitIdle()
	if n := e.p.upstreams.Get(e.bal.Snapshot(), backendOf(t, e.bal, "b1")).IdleCount(); n != 1 {
		t.Errorf("%d idle backend connections after three streamed responses in turn, want 1 (reused)", n)
	}
}

// TestLeaseHeldWhileStreaming checks the lease of a streamed response: held while the body is
// still coming, released once the client has the last byte.
func TestLeaseHeldWhileStreaming(t *testing.T) {
	release := make(chan struct{})
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			_, _ = w.WriteString("first part ")
			_ = w.Flush()
			<-release
			_, _ = w.WriteString("last part")
		})
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	rc := dialRaw(t, e.ln, nil)
	if _, err := io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("first part "))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first part " {
		t.Fatalf("first part %q, %v", first, err)
	}
	b1 := backendOf(t, e.bal, "b1")
	if n := b1.InFlight(); n != 1 {
		t.Fatalf("in flight while the body streams = %d, want 1", n)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "last part" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	testproc.WaitFor(t, 10*time.Second, "the lease to be released after the last byte", func() bool { return b1.InFlight() == 0 })
}

func TestUnexpectedSwitchingProtocols(t *testing.T) {
	addr, hits := rawBackendAddr(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
	ok := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{
		{ID: "a-switch", Address: addr}, {ID: "b-ok", Address: ok.addr},
	}, tieBreakID)

	e := newEnv(t, cfg, "a-switch", "b-ok")
	r := e.do("GET", "shop.test", "/", "")
	if r.code != 502 || r.headers["x-pollbal-reason"] != "bad_response" || r.headers["x-pollbal-backend"] != "a-switch" {
		t.Fatalf("got %v, want 502 bad_response from a-switch", r)
	}
	if hits.Load() != 1 || ok.hits.Load() != 0 {
		t.Errorf("backends got %d and %d requests, want 1 and 0 (not retried)", hits.Load(), ok.hits.Load())
	}
	e.waitIdle()
}

func TestStreamedUpload(t *testing.T) {
	sink := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		body := ctx.Request.Body()
		ctx.SetBodyString(fmt.Sprintf("%d %v", len(body), bytes.Equal(body, patternBytes(len(body)))))
	})
	hangup, hangupHits := rawBackendAddr(t, "")
	cfg := configtest.New([]configs.App{
		{Name: "shop", Hosts: []string{"shop.test"}},
		{Name: "flaky", Hosts: []string{"flaky.test"}, Pool: "pool-flaky"},
	}, []configs.Backend{
		{ID: "b1", Address: sink.addr},
		{ID: "f1-hangup", Address: hangup, Pool: "pool-flaky"},
		{ID: "f2-sink", Address: sink.addr, Pool: "pool-flaky"},
	}, tieBreakID)

	cfg.Proxy.BufferRequestBody = 1000
	cfg.Proxy.MaxRequestBody = 4 << 20
	e := newEnv(t, cfg, "b1", "f1-hangup", "f2-sink")
	body := string(patternBytes(3 << 20))

	tests := []struct {
		name     string
		request  string
		wantCode int
		wantBody string
	}{
		{name: "streamed with a length", wantCode: 200, wantBody: "3145728 true",
			request: "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3145728\r\n\r\n" + body},
		{name: "streamed chunked", wantCode: 200, wantBody: "3145728 true",
			request: "POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body) + "0\r\n\r\n"},
		{name: "small chunked body buffered", wantCode: 200, wantBody: "500 true",
			request: "POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body[:500]) + "0\r\n\r\n"},
		// The server reads the first buffer_request_body bytes before the handler sees the request.
		{name: "length over the limit", wantCode: 413,
			request: "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5000000\r\n\r\n" + body[:10000]},
		{name: "chunked over the limit", wantCode: 413,
			request: "POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body) + chunk(body)},
		{name: "streamed PUT not retried after a hang-up", wantCode: 502,
			request: "PUT / HTTP/1.1\r\nHost: flaky.test\r\nContent-Length: 3145728\r\n\r\n" + body},
		{name: "buffered PUT retried after a hang-up", wantCode: 200, wantBody: "500 true",
			request: "PUT / HTTP/1.1\r\nHost: flaky.test\r\nContent-Length: 500\r\n\r\n" + body[:500]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := sink.hits.Load()
			r := rawExchange(t, e.ln, tt.request)
			if r.code != tt.wantCode || (tt.wantBody != "" && r.body != tt.wantBody) {
				t.Fatalf("got %d %q, want %d %q", r.code, r.body, tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == 413 {
				if r.headers["x-pollbal-reason"] != "body_too_large" || r.headers["connection"] != "close" {
					t.Errorf("413 headers %v, want body_too_large and Connection: close", r.headers)
				}
				if n := sink.hits.Load() - before; n != 0 {
					t.Errorf("backend answered %d requests over the limit", n)
				}
			}
			e.waitIdle()
		})
	}
	if n := hangupHits.Load(); n != 2 {
		t.Errorf("hang-up backend got %d requests, want 2", n)
	}
}

// stallBackend accepts connections, reads one request on each and then waits for the
// connection to be closed by the peer, sending headers and part of a body first when partial
// is set. It reports each request's arrival and each close it saw.
type stallBackend struct {
	addr    string
	arrived chan struct{}
	closed  chan time.Time
}

func startStallBackend(t *testing.T, partial bool) *stallBackend {
	t.Helper()
	sb := &stallBackend{arrived: make(chan struct{}, 4), closed: make(chan time.Time, 4)}
	sb.addr = testproc.ServeLocal(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		if partial {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"+strings.Repeat("x", 70000))
		}
		sb.arrived <- struct{}{}
		_, _ = io.Copy(io.Discard, c) // until pollbal closes the connection
		sb.closed <- time.Now()
	})
	return sb
}

// TestClientGoneEndsForward checks that a client that closes its connection while its request
// is being forwarded ends the forward within a second: the backend connection is closed and
// the lease released, though the backend never finishes; both while the backend has not
// answered yet and while its response is streaming. A client that only shuts down its write
// side (a half-close) counts as gone too, as the README says. The proxy serves a real socket
// here: the check peeks at it.
func TestClientGoneEndsForward(t *testing.T) {
	for _, tc := range []struct {
		partial, halfClose bool
	}{{}, {partial: true}, {halfClose: true}, {partial: true, halfClose: true}} {
		partial := tc.partial
		name := fmt.Sprintf("response begun %v", partial)
		if tc.halfClose {
			name += ", half-close"
		}
		t.Run(name, func(t *testing.T) {
			sb := startStallBackend(t, partial)
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: sb.addr}}, tieBreakID)
			e := newEnv(t, cfg, "b1")
			addr := e.serveTCP(t)

			c, err := net.Dial("tcp4", addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			<-sb.arrived
			if partial {
				if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "HTTP/1.1 200 OK\r\n" {
					t.Fatalf("client read %q, %v", line, err)
				}
			}
			b1 := backendOf(t, e.bal, "b1")
			if n := b1.InFlight(); n != 1 {
				t.Fatalf("in flight = %d, want 1", n)
			}
			start := time.Now()
			if tc.halfClose {
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			} else {
				_ = c.Close()
			}
			testproc.WaitFor(t, 10*time.Second, "the lease to be released", func() bool { return b1.InFlight() == 0 })
			released := time.Since(start)
			backendClosed := (<-sb.closed).Sub(start)
			t.Logf("client closed: lease released after %v, backend connection closed after %v", released, backendClosed)
			if released > time.Second || backendClosed > time.Second {
				t.Errorf("forward ended %v / %v after the client left, want within 1s", released, backendClosed)
			}
			if partial {
				return // the response had begun: a request answered, though cut short
			}
			// No answer reached the client: a client gone, not a request answered 400.
			testproc.WaitFor(t, 10*time.Second, "the handler to return", func() bool { return e.p.handling.Load() == 0 })
			if got, _ := metrictest.Value(t, e.reg, `pollbal_client_gone_total{stage="forwarding"}`); got != 1 {
				t.Errorf(`pollbal_client_gone_total{stage="forwarding"} = %v, want 1`, got)
			}
			wantNoRequestCounted(t, e.reg, "the request whose client went away")
			if got := e.responsesTotal(reasonBadRequest); got != 0 {
				t.Errorf("pollbal_responses_total{reason=bad_request} = %v, want 0", got)
			}
		})
	}
}

// TestClientCheckIgnoresLiveClients checks that the client check leaves alone a forward whose
// client is still there, though the backend takes several checks to answer.
func TestClientCheckIgnoresLiveClients(t *testing.T) {
	var waited atomic.Int64
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		deadline := time.NewTimer(5 * upstream.ClientCheckEvery * upstream.WatchdogTick)
		<-deadline.C
		waited.Store(int64(time.Since(start)))
		ctx.SetBodyString("late but fine")
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	addr := e.serveTCP(t)
	c := &fasthttp.HostClient{Addr: addr}
	status, body, err := c.Get(nil, "http://shop.test/")
	if err != nil || status != 200 || string(body) != "late but fine" {
		t.Fatalf("got %d %q, %v", status, body, err)
	}
	t.Logf("backend answered after %v", time.Duration(waited.Load()))
}

// Regression: a streamed response of unknown length went to an HTTP/1.0 client in chunked
// coding, which such a client cannot read. It now gets the body unframed, ended by the close
// of the connection; an HTTP/1.1 client still gets it chunked.
func TestStreamedResponseToHTTP10Client(t *testing.T) {
	const size = 200000
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyStream(&pattern{n: size}, -1) })
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	want := string(patternBytes(size))
	for _, tt := range []struct {
		name, proto string
		wantChunked bool
	}{
		{name: "HTTP/1.0", proto: "HTTP/1.0"},
		{name: "HTTP/1.1", proto: "HTTP/1.1", wantChunked: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, e.ln, nil)
			if _, err := io.WriteString(rc.c, "GET / "+tt.proto+"\r\nHost: shop.test\r\nConnection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(rc.c) // to the close
			if err != nil {
				t.Fatal(err)
			}
			head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
			chunked := strings.Contains(strings.ToLower(head), "transfer-encoding: chunked")
			if chunked != tt.wantChunked || strings.Contains(strings.ToLower(head), "content-length") ||
				!strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || !strings.Contains(head, "X-Pollbal-Backend: b1") {
				t.Fatalf("header %q: want chunked %v, no length", head, tt.wantChunked)
			}
			if !tt.wantChunked && body != want {
				t.Fatalf("body of %d bytes, want the %d sent", len(body), size)
			}
			e.waitIdle()
		})
	}
}

// Regression: a slow body of known length reached the client only once 4 KiB had piled up in
// fasthttp's write buffer. Each piece now reaches the client as soon as it arrives.
func TestSlowBodyPiecesReachTheClientAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	next := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n"+strings.Repeat("a", 100))
		<-next // the rest never comes while the test runs
	}()
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: ln.Addr().String()}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	t.Cleanup(func() { close(next) }) // before the proxy's shutdown, which waits for the forward
	rc := dialRaw(t, e.ln, nil)
	if _, err := io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != strings.Repeat("a", 100) {
		t.Fatalf("first 100 bytes: %q, %v (held back by the proxy?)", got, err)
	}
	_ = rc.c.Close()
}

// Regression: a client that stalls in the middle of a streamed upload stalled the watchdog (its
// client check waited for the socket's read lock, held by the upload's blocking read), so no
// other forward got its backend timeout; and the stall counted against the upload's own
// backend timeout, blaming the backend for a slow client.
func TestStalledUploadStallsNothing(t *testing.T) {
	sink := startStallBackend(t, false) // reads the upload as it comes, never answers
	slow := startConnBackend(t)
	cfg := configtest.New([]configs.App{
		{Name: "up", Hosts: []string{"up.test"}},
		{Name: "slow", Hosts: []string{"slow.test"}, Pool: "pool-slow"},
	}, []configs.Backend{
		{ID: "sink", Address: sink.addr},
		{ID: "slow", Address: slow.addr, Pool: "pool-slow"},
	}, tieBreakID)

	cfg.Proxy.BackendTimeout = 200 * time.Millisecond
	cfg.Proxy.MaxRequestBody = 100 << 20
	e := newEnv(t, cfg, "sink", "slow")
	addr := e.serveTCP(t)

	up, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if _, err := io.WriteString(up, "POST / HTTP/1.1\r\nHost: up.test\r\nContent-Length: 10000000\r\n\r\n"+strings.Repeat("x", 300000)); err != nil {
		t.Fatal(err)
	}
	sinkB := backendOf(t, e.bal, "sink")
	testproc.WaitFor(t, 10*time.Second, "the upload to be forwarded", func() bool { return sinkB.InFlight() == 1 })

	start := time.Now()
	c := &fasthttp.HostClient{Addr: addr, ReadTimeout: 5 * time.Second}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://slow.test/stall")
	if err := c.Do(req, resp); err != nil || resp.StatusCode() != 504 {
		t.Fatalf("stalled backend: %d, %v; want 504", resp.StatusCode(), err)
	}
	elapsed := time.Since(start)
	t.Logf("504 after %v while an upload stalls", elapsed)
	if elapsed > 2*time.Second {
		t.Errorf("504 after %v, want about the 200ms backend timeout", elapsed)
	}
	if n := sinkB.InFlight(); n != 1 {
		t.Errorf("the stalled upload's forward ended (in flight %d) after %v: the client's stall was counted against the backend", n, elapsed)
	}
	_ = up.Close()
	testproc.WaitFor(t, 10*time.Second, "the upload's lease to be released once its client left", func() bool { return sinkB.InFlight() == 0 })
}

// TestConnectionReuse checks which backend connections go back to the pool: one whose response
// was read to its end is reused; one on which the backend sent more than its response, or
// asked to close, is not.
func TestConnectionReuse(t *testing.T) {
	tests := []struct {
		name      string
		reply     string
		wantConns int64
	}{
		{name: "clean response", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", wantConns: 1},
		{name: "bytes after the response", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK", wantConns: 3},
		{name: "backend closes", reply: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", wantConns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var conns atomic.Int64
			addr := testproc.ServeLocal(t, func(c net.Conn) {
				conns.Add(1)
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, tt.reply); err != nil {
						return
					}
				}
			})
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: addr}}, tieBreakID)
			e := newEnv(t, cfg, "b1")
			for i := range 3 {
				if r := e.do("GET", "shop.test", "/", ""); r.code != 200 || r.body != "ok" {
					t.Fatalf("request %d: %v", i, r)
				}
			}
			if n := conns.Load(); n != tt.wantConns {
				t.Errorf("3 requests in turn took %d backend connections, want %d", n, tt.wantConns)
			}
		})
	}
}

// Regression: a streamed response of unknown length relayed to an HTTP/1.0 client runs on the
// hijacked connection, which the client timeouts no longer watched, so a client that stopped
// reading held the backend connection and the lease for as long as it stayed connected. A
// relay that cannot write for client_timeout now ends, releasing the lease.
func TestRelayToHTTP10ClientThatStopsReading(t *testing.T) {
	const limit = 200 * time.Millisecond
	e, _ := limitsEnv(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStream(&pattern{n: 1 << 40}, -1) // far more than the pipes hold
	}, func(p *configs.Proxy) { p.ClientTimeout = limit })
	rc := dialRaw(t, e.ln, nil)
	if _, err := io.WriteString(rc.c, "GET / HTTP/1.0\r\nHost: shop.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := rc.br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	// The client reads nothing more, and stays connected.
	b := backendOf(t, e.bal, "b1")
	testproc.WaitFor(t, 10*time.Second, "the relay to begin", func() bool { return b.InFlight() == 1 })
	e.waitIdle()
	if n := testutil.ToFloat64(e.p.connMetrics.clientTimeouts); n != 1 {
		t.Errorf("client timeouts counted %v, want 1", n)
	}
}

// Regression: a response relayed to an HTTP/1.0 client is handed to fasthttp's hijack handler,
// which fasthttp skips when it fails to flush a response held back for an earlier pipelined
// request; the relay's stream was never closed, so its lease and backend connection leaked.
// Closing the client connection now ends a relay that never started.
func TestRelayThatNeverStartsReleasesItsLease(t *testing.T) {
	answer := make(chan struct{})
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/stream" {
			<-answer
			ctx.SetBodyStream(&pattern{n: 1 << 20}, -1)
			return
		}
		ctx.SetBodyString("small")
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	rc := dialRaw(t, e.ln, nil)
	// Pipelined: the first answer stays in fasthttp's write buffer while the second is served.
	if _, err := io.WriteString(rc.c, "GET /small HTTP/1.1\r\nHost: shop.test\r\n\r\nGET /stream HTTP/1.0\r\nHost: shop.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b := backendOf(t, e.bal, "b1")
	testproc.WaitFor(t, 10*time.Second, "the second request to reach the backend", func() bool { return b.InFlight() == 1 && be.hits.Load() == 2 })
	_ = rc.c.Close()
	close(answer)
	e.waitIdle()
}

// Regression: after MaxInterim informational responses the next one was taken for the final
// answer and passed on as such, and the backend connection, its real answer still to come,
// went back to the pool, where the next request would have read that answer as its own. Too
// many informational responses are now a bad response.
func TestTooManyInformationalResponses(t *testing.T) {
	addr, _ := rawBackendAddr(t, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", upstream.MaxInterim+1)+
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	r := e.do("GET", "shop.test", "/", "")
	if r.code != 502 || r.headers["x-pollbal-reason"] != "bad_response" {
		t.Fatalf("got %v, want 502 bad_response", r)
	}
	if n := e.p.upstreams.Get(e.bal.Snapshot(), backendOf(t, e.bal, "b1")).IdleCount(); n != 0 {
		t.Errorf("%d backend connections kept for reuse, want none", n)
	}
	e.waitIdle()
}
