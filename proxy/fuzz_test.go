package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/proxy/clientconn"
)

// canaryMark in a fuzz input is replaced by the address of a listener that nothing may ever
// connect to: a request naming it (absolute-form target, CONNECT authority, Host) must go to
// the pool's backend or be refused, never to the host it names.
const canaryMark = "{canary}"

// fuzzDeadline bounds one connection: by then pollbal has answered every complete request on
// it and closed it (the client half-closes after writing, so pollbal sees the end of input).
const fuzzDeadline = 10 * time.Second

// fuzzEnv is the proxy on a real fasthttp server on 127.0.0.1, in front of one backend that
// answers every request "ok", and a canary listener that counts the connections it got. The
// backend also counts what must never reach it: a header name that is not a token or holds
// "_", a TRACE request, and an Authorization header; and the requests it reads from a
// connection that pollbal has already closed (clientGone peeks at the socket).
type fuzzEnv struct {
	bal       *balancer.Balancer
	addr      string // the proxy's
	backend   *backend
	badNames  atomic.Int64
	traces    atomic.Int64
	auths     atomic.Int64
	canary    string
	canaryHit *atomic.Int64
	abandoned atomic.Int64 // requests read after pollbal had closed their connection
}

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	env := &fuzzEnv{}
	be := startBackend(tb, func(ctx *fasthttp.RequestCtx) {
		for k := range ctx.Request.Header.All() {
			if requestName(k) != nameForwarded {
				env.badNames.Add(1)
			}
			if equalFold(k, "Authorization") {
				env.auths.Add(1)
			}
		}
		if refusedMethod(ctx.Method()) {
			env.traces.Add(1)
		}
		if clientconn.Gone(ctx.Conn()) {
			env.abandoned.Add(1)
		}
		ctx.SetBodyString("ok")
	})
	hits := new(atomic.Int64)
	canary := testproc.ServeLocal(tb, func(net.Conn) { hits.Add(1) })

	cfg := configtest.New([]configs.App{{Name: "all", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 64}}, tieBreakID)
	cfg.Proxy.Retries = 0 // one answer per forwarded request: the backend's hits can be checked against them
	cfg.Proxy.MaxRequestBody = 64 << 10
	bal, err := balancer.New(balancer.Options{Config: cfg, Registerer: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	markReady(bal, "b1")
	p, err := New(Options{Balancer: bal, Registerer: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	env.bal, env.addr, env.backend, env.canary, env.canaryHit = bal, ln.Addr().String(), be, canary, hits
	return env
}

// fuzzSeeds are requests an attacker or a broken client sends: smuggling attempts (CL+TE,
// duplicate or odd Content-Length, obfuscated Transfer-Encoding), bare CR and LF, NUL,
// absolute-form and authority-form targets, CONNECT, Expect, oversized headers, pipelining.
var fuzzSeeds = []string{
	"GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"POST /form HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	// Smuggling: both framings, in either order.
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\nContent-Length: 15\r\n\r\nx=1\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5, 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: +5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: -1\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 0x5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 99999999999999999999999\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: identity, chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding:\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: CHUNKED\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
	// Bare CR, bare LF, NUL.
	"GET / HTTP/1.1\rHost: shop.test\r\r",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX-A: a\rb\r\n\r\n",
	"GET / HTTP/1.1\nHost: shop.test\n\n",
	"GET / HTTP/1.1\r\nHost: shop.test\nContent-Length: 5\r\n\r\nhello",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX-A: a\x00b\r\n\r\n",
	"GET /\x00admin HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"G\x00T / HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	// Targets naming another host.
	"GET http://" + canaryMark + "/ HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"GET http://" + canaryMark + "/x HTTP/1.1\r\n\r\n",
	"GET http://user:pw@" + canaryMark + "/ HTTP/1.1\r\nHost: " + canaryMark + "\r\n\r\n",
	"GET //" + canaryMark + "/ HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"GET " + canaryMark + " HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: " + canaryMark + "\r\n\r\n",
	"CONNECT " + canaryMark + " HTTP/1.1\r\nHost: " + canaryMark + "\r\n\r\n\x16\x03\x01\x00\x05hello",
	"connect " + canaryMark + " HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\n\r\nabc",
	// Expect.
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 209715200\r\nExpect: 100-continue\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"PUT / HTTP/1.1\r\nHost: shop.test\r\nExpect: 100-continue\r\n\r\n",
	// Oversized and odd headers.
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX-Big: " + strings.Repeat("a", 10000) + "\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\n" + strings.Repeat("X-Many: 1\r\n", 500) + "\r\n",
	"GET /" + strings.Repeat("p", 9000) + " HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nNoColon\r\n: empty-name\r\nBad Name: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: X-Forwarded-For, Host\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
	// Header names (trailers too), userinfo, TRACE.
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real_IP: 6.6.6.6\r\nx_forwarded_proto: https\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nFoo Bar: x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX_A B: x\r\nContent-Length: 3\r\n\r\nabc",
	"GET / HTTP/1.1\r\nHost: shop.test\r\nX-A\x01: x\r\nX-\xc3\xa9: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: user@shop.test\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: user:pw@" + canaryMark + "\r\n\r\n",
	"GET http://user:pw@shop.test/ HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"GET http://@shop.test/ HTTP/1.0\r\n\r\n",
	"GET //user@" + canaryMark + "/ HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX 1: 1\r\nX_Bad: 1\r\nForwarded: for=6.6.6.6\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\nTrailer: X_Bad\r\n\r\n5\r\nhello\r\n0\r\nX_Bad: 1\r\n\r\n",
	"TRACE / HTTP/1.1\r\nHost: shop.test\r\nCookie: session=secret\r\n\r\n",
	"trace / HTTP/1.1\r\nHost: shop.test\r\nMax-Forwards: 0\r\n\r\n",
	"GET /1 HTTP/1.1\r\nHost: shop.test\r\nX_Y: 1\r\n\r\nTRACE /2 HTTP/1.1\r\nHost: shop.test\r\n\r\nGET /3 HTTP/1.1\r\nHost: a@shop.test\r\n\r\n",
	// Pipelining.
	"GET /1 HTTP/1.1\r\nHost: shop.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: shop.test\r\n\r\nHEAD /3 HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"POST /1 HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\n\r\nabcGET /2 HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"GET /1 HTTP/1.1\r\nHost: shop.test\r\n\r\nCONNECT " + canaryMark + " HTTP/1.1\r\nHost: shop.test\r\n\r\nGET /3 HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	// Other protocols and versions.
	"GET / HTTP/1.0\r\n\r\n",
	"GET /\r\n",
	"GET / HTTP/9.9\r\nHost: shop.test\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
	"\r\n\r\nGET / HTTP/1.1\r\nHost: shop.test\r\n\r\n",
	"",
}

// FuzzRequest writes arbitrary bytes on a raw TCP connection to a running proxy and checks what
// must hold whatever a client sends: no panic (it would end the process), an answer or a close
// within fuzzDeadline, no lease left taken, nothing connecting to a host the request named, no
// request reaching the backend that the client got no answer for, and none reaching it with a
// header name that is not a token or holds "_", as TRACE, or with an Authorization header the
// client did not send (userinfo turned into one).
func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		in = bytes.ReplaceAll(in, []byte(canaryMark), []byte(env.canary))
		hitsBefore, abandonedBefore := env.backend.hits.Load(), env.abandoned.Load()
		badNames, traces, auths := env.badNames.Load(), env.traces.Load(), env.auths.Load()

		out := env.send(t, in)

		if len(out) > 0 && !bytes.HasPrefix(out, []byte("HTTP/1.1 ")) {
			t.Errorf("answer does not start with a status line: %q", truncate(out))
		}
		testproc.WaitFor(t, 10*time.Second, "every lease to be released", func() bool {
			for _, b := range env.bal.Snapshot().Backends() {
				if b.InFlight() != 0 {
					return false
				}
			}
			return true
		})
		// The backend answers a fixed "ok" and pollbal's own answers are fixed text, so every
		// status line in out is one answer. A request that reaches the backend after pollbal
		// closed its connection is not counted: pollbal cut that forward (send's half-close
		// counts as the client going away, and pollbal answers such a request itself), and
		// the backend may read the request only after this input, or a later one, was checked.
		answers := bytes.Count(out, []byte("HTTP/1.1 ")) - bytes.Count(out, []byte("HTTP/1.1 100 "))
		forwarded := env.backend.hits.Load() - hitsBefore - (env.abandoned.Load() - abandonedBefore)
		if forwarded > int64(answers) {
			t.Errorf("backend received %d requests, client got %d answers: %q", forwarded, answers, truncate(out))
		}
		if n := env.badNames.Load() - badNames; n != 0 {
			t.Errorf("%d header names that are not tokens or hold \"_\" reached the backend: %q", n, truncate(in))
		}
		if n := env.traces.Load() - traces; n != 0 {
			t.Errorf("%d TRACE or CONNECT requests reached the backend: %q", n, truncate(in))
		}
		if n := env.auths.Load() - auths; n != 0 && !bytes.Contains(bytes.ToLower(in), []byte("authorization")) {
			t.Errorf("%d Authorization headers the client did not send reached the backend: %q", n, truncate(in))
		}
		if n := env.canaryHit.Load(); n != 0 {
			t.Fatalf("a request reached the host its target named (%d connections)", n)
		}
	})
}

// send writes in on a new connection, half-closes it, and reads until pollbal closes it.
func (e *fuzzEnv) send(t *testing.T, in []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp4", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(fuzzDeadline)); err != nil {
		t.Fatal(err)
	}
	// pollbal may answer and close before reading everything (a refused request): a failed
	// write is not a failure, an unanswered connection is.
	_, _ = c.Write(in)
	_ = c.(*net.TCPConn).CloseWrite()
	out, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection neither answered nor closed within %v; got %q", fuzzDeadline, truncate(out))
	}
	// A reset after the answer (pollbal closed with unread input) is a close.
	return out
}

func truncate(b []byte) []byte {
	if len(b) > 512 {
		return b[:512]
	}
	return b
}
