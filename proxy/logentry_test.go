package proxy

import (
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/accesslog/accesslogtest"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/protocol"
	"pollbal/proxy/upstream"
)

func TestEndOf(t *testing.T) {
	tests := []struct {
		name     string
		o        outcome
		own      bool
		t        upstream.Transfer
		timedOut bool
		want     accesslog.End
	}{
		{name: "a backend's answer sent whole", o: outcomeOK, want: accesslog.EndOK},
		{name: "a streamed body sent whole", o: outcomeOK, t: upstream.TransferWhole, want: accesslog.EndOK},
		{name: "404 no_app, 405, 400, 501 (no forward)", o: outcomeOK, own: true, want: accesslog.EndRefused},
		{name: "503 pool_exhausted", o: outcomeNoCandidate, own: true, want: accesslog.EndRefused},
		{name: "503 pool_exhausted after refusals as full", o: outcomeFull, own: true, want: accesslog.EndRefused},
		{name: "503 queue_full", o: outcomeQueueFull, own: true, want: accesslog.EndRefused},
		{name: "503 queue_timeout", o: outcomeQueueTimeout, own: true, want: accesslog.EndRefused},
		{name: "413 of a streamed body", o: outcomeBodyTooLarge, own: true, want: accesslog.EndRefused},
		{name: "502 backend_unreachable (dial)", o: outcomeNotSent, own: true, want: accesslog.EndBackendError},
		{name: "502 after a reset", o: outcomeConnFailed, own: true, want: accesslog.EndBackendError},
		{name: "502 bad_response", o: outcomeBadResponse, own: true, want: accesslog.EndBackendError},
		{name: "504 backend_timeout", o: outcomeTimeout, own: true, want: accesslog.EndBackendTimeout},
		{name: "client left the queue", o: outcomeLeftQueue, own: false, want: accesslog.EndClientGone},
		{name: "client left during the forward", o: outcomeClientGone, want: accesslog.EndClientGone},
		{name: "client failed sending its body (answered 400)", o: outcomeClientGone, own: true, want: accesslog.EndClientGone},
		{name: "client cut for client_timeout sending its body", o: outcomeClientGone, own: true, timedOut: true, want: accesslog.EndClientTimeout},
		{name: "stream cut: client gone", o: outcomeOK, t: upstream.TransferClientGone, want: accesslog.EndClientGone},
		{name: "stream cut: client_timeout", o: outcomeOK, t: upstream.TransferClientGone, timedOut: true, want: accesslog.EndClientTimeout},
		{name: "stream cut: backend broke off", o: outcomeOK, t: upstream.TransferBackendError, want: accesslog.EndBackendError},
		{name: "stream cut: backend silent", o: outcomeOK, t: upstream.TransferBackendTimeout, want: accesslog.EndBackendTimeout},
		{name: "a timed-out connection's whole answer", o: outcomeOK, timedOut: true, want: accesslog.EndOK},
		{name: "upgraded connection closed", o: outcomeOK, t: upstream.TransferUpgradeClosed, want: accesslog.EndUpgradeClosed},
		{name: "upgraded connection closed by a client timeout", o: outcomeOK, t: upstream.TransferUpgradeClosed, timedOut: true, want: accesslog.EndUpgradeClosed},
	}
	for _, tt := range tests {
		if got := endOf(tt.o, tt.own, tt.t, tt.timedOut); got != tt.want {
			t.Errorf("%s: endOf = %s, want %s", tt.name, got, tt.want)
		}
	}
}

var newID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestRequestIDs(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	long := strings.Repeat("x", accesslog.MaxRequestID)
	tests := []struct {
		name    string
		headers []string // name, value pairs, in order
		keep    string   // the ID kept; "" when a new one is made
		tp      string   // the traceparent returned
	}{
		{name: "none", headers: []string{"Accept", "*/*"}},
		{name: "a valid one", headers: []string{"X-Request-Id", "req-42/a:b"}, keep: "req-42/a:b"},
		{name: "200 bytes", headers: []string{"X-Request-Id", long}, keep: long},
		{name: "201 bytes", headers: []string{"X-Request-Id", long + "x"}},
		{name: "empty", headers: []string{"X-Request-Id", ""}},
		{name: "a space", headers: []string{"X-Request-Id", "a b"}},
		{name: "a byte above 0x7e", headers: []string{"X-Request-Id", "caf\xc3\xa9"}},
		{name: "two of them, both valid", headers: []string{"X-Request-Id", "one", "X-Request-Id", "two"}},
		{name: "lower-case name", headers: []string{"x-request-id", "low"}, keep: "low"},
		{name: "a traceparent", headers: []string{"traceparent", tp, "X-Request-Id", "r1"}, keep: "r1", tp: tp},
		{name: "two traceparents: the first", headers: []string{"Traceparent", tp, "Traceparent", "other"}, tp: tp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req fasthttp.Request
			req.Header.SetHost("shop.test")
			for i := 0; i+1 < len(tt.headers); i += 2 {
				req.Header.Add(tt.headers[i], tt.headers[i+1])
			}
			var fresh [accesslog.NewRequestIDLen]byte
			id, traceparent := requestIDs(&req.Header, &fresh)
			if string(traceparent) != tt.tp {
				t.Errorf("traceparent %q, want %q", traceparent, tt.tp)
			}
			want := tt.keep
			if want == "" {
				if !newID.Match(id) {
					t.Fatalf("ID %q, want a new one of 32 lower-case hex digits", id)
				}
				want = string(id)
			} else if string(id) != want {
				t.Fatalf("ID %q, want the request's %q kept", id, want)
			}
			var sent []string
			for k, v := range req.Header.All() {
				if strings.EqualFold(string(k), headerRequestID) {
					sent = append(sent, string(v))
				}
			}
			if len(sent) != 1 || sent[0] != want {
				t.Errorf("the request goes on with X-Request-Id %q, want exactly %q", sent, want)
			}
		})
	}
}

// TestRequestIDsAreNew: IDs pollbal makes differ from one request to the next.
func TestRequestIDsAreNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		var req fasthttp.Request
		var fresh [accesslog.NewRequestIDLen]byte
		id, _ := requestIDs(&req.Header, &fresh)
		if seen[string(id)] {
			t.Fatalf("ID %s made twice", id)
		}
		seen[string(id)] = true
	}
}

func TestForwardedClient(t *testing.T) {
	trusted := newTrustedNets(&configs.Config{Proxy: configs.Proxy{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}})
	peerTrusted, peerOther := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("192.0.2.9")
	tests := []struct {
		name string
		peer netip.Addr
		xff  string
		want string
	}{
		{name: "an untrusted peer's X-Forwarded-For is ignored", peer: peerOther, xff: "203.0.113.7", want: "192.0.2.9"},
		{name: "a trusted peer without X-Forwarded-For", peer: peerTrusted, want: "10.0.0.1"},
		{name: "a trusted peer's last entry", peer: peerTrusted, xff: "198.51.100.1, 203.0.113.7", want: "203.0.113.7"},
		{name: "over trusted hops", peer: peerTrusted, xff: "203.0.113.7,10.1.1.1 ,\t10.2.2.2", want: "203.0.113.7"},
		{name: "every hop trusted: the first one", peer: peerTrusted, xff: "10.9.9.9, 10.1.1.1", want: "10.9.9.9"},
		{name: "an entry that is no address stops the walk", peer: peerTrusted, xff: "203.0.113.7, unknown, 10.1.1.1", want: "10.1.1.1"},
		{name: "garbage right away", peer: peerTrusted, xff: "<script>", want: "10.0.0.1"},
		{name: "an empty entry", peer: peerTrusted, xff: "203.0.113.7, ", want: "10.0.0.1"},
		{name: "with a port", peer: peerTrusted, xff: "203.0.113.7:4711", want: "203.0.113.7"},
		{name: "IPv6 with a port", peer: peerTrusted, xff: "[2001:db8::7]:4711", want: "2001:db8::7"},
		{name: "IPv6 over a trusted IPv6 hop", peer: peerTrusted, xff: "2001:db8::7, fd00::1", want: "2001:db8::7"},
		{name: "IPv4-mapped", peer: peerTrusted, xff: "::ffff:203.0.113.7", want: "203.0.113.7"},
		{name: "longer than any address", peer: peerTrusted, xff: strings.Repeat("1", 65), want: "10.0.0.1"},
	}
	for _, tt := range tests {
		var scratch [64]byte
		if got := forwardedClient(tt.peer, []byte(tt.xff), trusted, &scratch); got.String() != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	// A chain longer than any deployment stops after maxForwardedHops trusted hops.
	chain := "203.0.113.7" + strings.Repeat(", 10.0.0.2", maxForwardedHops+5)
	var scratch [64]byte
	if got := forwardedClient(peerTrusted, []byte(chain), trusted, &scratch); got.String() != "10.0.0.2" {
		t.Errorf("a chain of %d trusted hops: %s, want the walk to stop at 10.0.0.2", maxForwardedHops+5, got)
	}
}

func TestPathAndQuery(t *testing.T) {
	for target, want := range map[string]string{
		"/a/b?c=d":                "/a/b?c=d",
		"//x/y":                   "//x/y",
		"http://shop.test/a?b":    "/a?b",
		"https://shop.test:8443/": "/",
		"http://shop.test":        "/",
		"http://shop.test?q=1":    "?q=1",
		"*":                       "*",
		"shop.test:443":           "shop.test:443",
	} {
		if got := pathAndQuery([]byte(target)); string(got) != want {
			t.Errorf("pathAndQuery(%q) = %q, want %q", target, got, want)
		}
	}
}

// logSink is an access log in JSON on a buffer, whose lines a test reads.
type logSink struct {
	t   testing.TB
	l   *accesslog.Logger
	cfg configs.AccessLog
	out testproc.Buffer
}

func newLogSink(t testing.TB, headers ...string) *logSink {
	t.Helper()
	s := &logSink{t: t, cfg: configs.AccessLog{Path: configs.AccessLogStdout, Format: configs.FormatJSON, Sample: 1,
		Buffer: configs.MinAccessLogBuffer, Headers: headers}}
	l, err := accesslog.New(accesslog.Options{Config: s.cfg, Stdout: &s.out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	s.l = l
	return s
}

// logEnv is newEnv with a logSink as its access log.
func logEnv(t testing.TB, cfg *configs.Config, ready ...string) (*env, *logSink) {
	t.Helper()
	s := newLogSink(t, "User-Agent", "X-Forwarded-For")
	return newEnvLogging(t, cfg, s.l, ready...), s
}

// logLine is one JSON line, its numbers as float64.
type logLine map[string]any

// lines has every line logged so far written (an Update to the same section is a barrier for
// the writer) and returns them.
func (s *logSink) lines() []logLine {
	s.t.Helper()
	if err := s.l.Update(s.cfg); err != nil {
		s.t.Fatal(err)
	}
	var out []logLine
	for _, text := range strings.Split(strings.TrimSuffix(s.out.String(), "\n"), "\n") {
		if text == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			s.t.Fatalf("line %q: %v", text, err)
		}
		out = append(out, l)
	}
	return out
}

// line waits for the one line with request_id id (a streamed response's comes after its last
// byte) and returns it.
func (s *logSink) line(id string) logLine {
	s.t.Helper()
	var found []logLine
	testproc.WaitFor(s.t, 10*time.Second, "the line of request "+id, func() bool {
		found = found[:0]
		for _, l := range s.lines() {
			if l["request_id"] == id {
				found = append(found, l)
			}
		}
		return len(found) > 0
	})
	if len(found) != 1 {
		s.t.Fatalf("%d lines for request %s: %v", len(found), id, found)
	}
	return found[0]
}

// check compares the fields of l named in want, as accesslogtest.Check does.
func (l logLine) check(t testing.TB, what string, want map[string]any) {
	t.Helper()
	accesslogtest.Check(t, what, l, want)
}

// TestAccessLogLines: every answer, the backend's and each of pollbal's own, gets one line
// with the fields that apply; the line's request_id is the X-Request-Id on the answer.
func TestAccessLogLines(t *testing.T) {
	var seenID, seenTrace string
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		seenID = string(ctx.Request.Header.Peek(headerRequestID))
		seenTrace = string(ctx.Request.Header.Peek(headerTraceparent)) // the backend does not normalize names; pollbal did
		ctx.Response.Header.Set(headerRequestID, "the-backends-own")
		if string(ctx.Path()) == "/404" {
			ctx.SetStatusCode(404)
		}
		ctx.SetBodyString("backend\n")
	})
	e, log := logEnv(t, everyAnswerConfig(t, be), "b1", "b-down", "b-slow")

	// One request, answered: its line, found by the X-Request-Id on the answer.
	lineOf := func(what string, r result) logLine {
		t.Helper()
		id := r.headers["x-request-id"]
		if !newID.MatchString(id) {
			t.Fatalf("%s: answer %v carries X-Request-Id %q, want a new ID", what, r, id)
		}
		return log.line(id)
	}

	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := e.do("POST", "shop.test", "/cart?id=42", "12345", "User-Agent", "test-agent", "traceparent", tp)
	served := lineOf("served", r)
	if r.code != 200 || r.body != "backend\n" || seenID != r.headers["x-request-id"] || seenTrace != tp {
		t.Errorf("served: %v; the backend saw X-Request-Id %q and traceparent %q, want the answer's ID and the traceparent as sent", r, seenID, seenTrace)
	}
	served.check(t, "served", map[string]any{
		"trace_id": "0af7651916cd43dd8448eb211c80319c", "client_ip": "unknown", "method": "POST", "host": "shop.test",
		"uri": "/cart?id=42", "proto": "HTTP/1.1", "tls": nil, "status": 200, "bytes_in": 5, "bytes_out": 8,
		"queue_ms": 0, "app": "shop", "service": "web", "pool": "default", "resolution": "default", "fallback": false,
		"backend": "b1", "backend_address": be.addr, "attempts": 1, "refusals": 0, "reason": nil, "end": "ok",
		"user_agent": "test-agent", "x_forwarded_for": nil,
	})
	if ms, ok := served["upstream_ms"].(float64); !ok || ms <= 0 || ms > served["duration_ms"].(float64) {
		t.Errorf("served: upstream_ms %v, duration_ms %v; want 0 < upstream_ms <= duration_ms", served["upstream_ms"], served["duration_ms"])
	}
	if ts, err := time.Parse(time.RFC3339, served["time"].(string)); err != nil || time.Since(ts) > time.Minute || time.Since(ts) < 0 {
		t.Errorf("served: time %v (%v), want the request's start", served["time"], err)
	}

	lineOf("a backend's 404", e.do("GET", "shop.test", "/404", "")).check(t, "a backend's 404", map[string]any{
		"status": 404, "reason": nil, "end": "ok", "backend": "b1"})

	tests := []struct {
		name string
		r    result
		want map[string]any
	}{
		{"no app", e.do("GET", "nowhere.test", "/", ""), map[string]any{"status": 404, "reason": reasonNoApp, "end": "refused",
			"app": nil, "pool": nil, "attempts": nil, "queue_ms": nil, "backend": nil}},
		{"pool exhausted", e.do("GET", "ghost.test", "/", ""), map[string]any{"status": 503, "reason": reasonPoolExhausted,
			"end": "refused", "app": "ghost", "pool": "pool-ghost", "resolution": "explicit", "attempts": 0, "refusals": 0,
			"fallback": false, "queue_ms": 0, "backend": nil, "upstream_ms": nil}},
		{"unreachable", e.do("GET", "down.test", "/", ""), map[string]any{"status": 502, "reason": reasonBackendUnreachable,
			"end": "backend_error", "backend": "b-down", "pool": "pool-down", "attempts": 1, "upstream_ms": nil}},
		{"silent backend", e.do("GET", "slow.test", "/", ""), map[string]any{"status": 504, "reason": reasonBackendTimeout,
			"end": "backend_timeout", "backend": "b-slow", "attempts": 1}},
		{"body too large", e.do("POST", "shop.test", "/", "far more than ten bytes"), map[string]any{"status": 413,
			"reason": reasonBodyTooLarge, "end": "refused", "attempts": 0}},
		{"CONNECT", rawExchange(t, e.ln, "CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test\r\n\r\n"), map[string]any{
			"status": 405, "reason": reasonMethodNotAllowed, "end": "refused", "method": "CONNECT"}},
		{"TRACE", e.do("TRACE", "shop.test", "/", ""), map[string]any{"status": 405, "reason": reasonMethodNotAllowed}},
		{"ambiguous framing", rawExchange(t, e.ln, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
			map[string]any{"status": 400, "reason": reasonBadRequest, "end": "refused"}},
		{"userinfo", rawExchange(t, e.ln, "GET http://user:pw@shop.test/ HTTP/1.1\r\nHost: shop.test\r\n\r\n"),
			map[string]any{"status": 400, "reason": reasonBadRequest, "end": "refused"}},
		{"header name with a space", rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nFoo Bar: 1\r\n\r\n"),
			map[string]any{"status": 400, "reason": reasonBadRequest, "end": "refused", "attempts": 0}},
		{"malformed (the server's error handler)", rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nno colon here\r\n\r\n"),
			map[string]any{"status": 400, "reason": reasonBadRequest, "end": "refused"}},
		{"headers too large", rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nX-Big: "+strings.Repeat("b", upstream.ReadBufferSize)+"\r\n\r\n"),
			map[string]any{"status": 431, "reason": reasonHeadersTooLarge, "end": "refused"}},
		{"Expect: 100-continue over the limit", rawExchange(t, e.ln, "PUT / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"),
			map[string]any{"status": 413, "reason": reasonBodyTooLarge, "end": "refused", "method": "PUT", "bytes_in": 0, "app": "shop"}},
		{"h2c upgrade", rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"),
			map[string]any{"status": 501, "reason": reasonUpgradeUnsupported, "end": "refused"}},
		{"HTTP/1.0 without Host", rawExchange(t, e.ln, "GET /x HTTP/1.0\r\n\r\n"),
			map[string]any{"status": 404, "reason": reasonNoApp, "proto": "HTTP/1.0", "uri": "/x", "host": nil}},
	}
	for _, tt := range tests {
		l := lineOf(tt.name, tt.r)
		if got := l["status"]; got != float64(tt.r.code) {
			t.Errorf("%s: line status %v, answer %d", tt.name, got, tt.r.code)
		}
		if bytesOut := l["bytes_out"]; bytesOut != float64(len(tt.r.body)) {
			t.Errorf("%s: bytes_out %v, the answer's body has %d", tt.name, bytesOut, len(tt.r.body))
		}
		l.check(t, tt.name, tt.want)
	}
	if n := len(log.lines()); n != len(tests)+2 {
		t.Errorf("%d lines for %d requests", n, len(tests)+2)
	}
	e.waitIdle()
}

// TestAccessLogRequestIDKept: a valid X-Request-Id goes to the backend, back on the answer and
// into the line as it came; an invalid one is replaced, the same way, by a new one.
func TestAccessLogRequestIDKept(t *testing.T) {
	var seen string
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) { seen = string(ctx.Request.Header.Peek(headerRequestID)) })
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e, log := logEnv(t, cfg, "b1")
	r := e.do("GET", "shop.test", "/", "", "X-Request-Id", "client-chose-this")
	if r.headers["x-request-id"] != "client-chose-this" || seen != "client-chose-this" {
		t.Errorf("a valid ID: answer has %q, backend saw %q; want it kept", r.headers["x-request-id"], seen)
	}
	log.line("client-chose-this").check(t, "kept", map[string]any{"status": 200})
	r = e.do("GET", "nowhere.test", "/", "", "X-Request-Id", "client-chose-this")
	if r.headers["x-request-id"] != "client-chose-this" {
		t.Errorf("own answer carries %q, want the client's ID", r.headers["x-request-id"])
	}

	r = e.do("GET", "shop.test", "/", "", "X-Request-Id", "has a space")
	id := r.headers["x-request-id"]
	if !newID.MatchString(id) || seen != id {
		t.Errorf("an invalid ID: answer has %q, backend saw %q; want one new ID for both", id, seen)
	}
	log.line(id)
}

// TestAccessLogClientIP: client_ip is the peer, or, from a trusted proxy, the client its
// X-Forwarded-For names.
func TestAccessLogClientIP(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	cfg.Proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	e, log := logEnv(t, cfg, "b1")
	for _, tc := range []struct {
		peer, want string
	}{{"127.0.0.2", "203.0.113.7"}, {"127.0.0.3", "127.0.0.3"}} {
		rc := dialRaw(t, e.ln, &net.TCPAddr{IP: net.ParseIP(tc.peer), Port: 40000})
		r := rc.exchange("GET / HTTP/1.1\r\nHost: shop.test\r\nX-Forwarded-For: 198.51.100.1, 203.0.113.7\r\n\r\n")
		log.line(r.headers["x-request-id"]).check(t, "from "+tc.peer, map[string]any{
			"client_ip": tc.want, "x_forwarded_for": "198.51.100.1, 203.0.113.7"})
	}
}

// TestAccessLogQueue: a request that waited in the queue has its wait in queue_ms, whether it
// got a slot or timed out; one that found the queue full did not wait.
func TestAccessLogQueue(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 1}}, tieBreakID)
	cfg.Proxy.QueueTimeout, cfg.Proxy.MaxQueue = 300*time.Millisecond, 1
	e, log := logEnv(t, cfg, "b1")
	app := e.bal.Snapshot().Route([]byte("shop.test"))
	held, err := e.bal.Acquire(e.bal.Snapshot(), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan result, 1)
	go func() { queued <- doWith(t, e.newClient(), "GET", "shop.test", "/", "") }()
	testproc.WaitFor(t, 10*time.Second, "a request queued", func() bool { return e.bal.QueueLength("default") == 1 })
	full := e.do("GET", "shop.test", "/", "")
	timedOut := <-queued
	log.line(full.headers["x-request-id"]).check(t, "queue full", map[string]any{"status": 503, "reason": reasonQueueFull,
		"end": "refused", "attempts": 0, "queue_ms": 0})
	l := log.line(timedOut.headers["x-request-id"])
	l.check(t, "queue timeout", map[string]any{"status": 503, "reason": reasonQueueTimeout, "end": "refused", "attempts": 0})
	if ms := l["queue_ms"].(float64); ms < 300 {
		t.Errorf("queue timeout: queue_ms %v, want at least the 300 ms waited", ms)
	}

	go func() { queued <- doWith(t, e.newClient(), "GET", "shop.test", "/", "") }()
	testproc.WaitFor(t, 10*time.Second, "a request queued", func() bool { return e.bal.QueueLength("default") == 1 })
	held.Release()
	l = log.line((<-queued).headers["x-request-id"])
	l.check(t, "served from the queue", map[string]any{"status": 200, "end": "ok", "attempts": 1, "backend": "b1"})
	if ms := l["queue_ms"].(float64); ms <= 0 || ms > l["duration_ms"].(float64) {
		t.Errorf("served from the queue: queue_ms %v, duration_ms %v", ms, l["duration_ms"])
	}
}

// TestAccessLogRefusals: a backend that refuses as full is an attempt and a refusal; the
// request goes on to the next one.
func TestAccessLogRefusals(t *testing.T) {
	full := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(503)
		ctx.Response.Header.Set(protocol.HeaderFull, "1")
	})
	ok := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "a-full", Address: full.addr}, {ID: "b-ok", Address: ok.addr}}, tieBreakID)

	e, log := logEnv(t, cfg, "a-full", "b-ok")
	r := e.do("GET", "shop.test", "/", "")
	log.line(r.headers["x-request-id"]).check(t, "refused, then served", map[string]any{
		"status": 200, "end": "ok", "attempts": 2, "refusals": 1, "backend": "b-ok"})
}

// TestAccessLogStreams: a streamed body's line is written after its last byte, with the bytes
// sent, and says who cut a body short.
func TestAccessLogStreams(t *testing.T) {
	const size = 1 << 20
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBody(patternBytes(size)) })
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e, log := logEnv(t, cfg, "b1")
	r := e.do("GET", "shop.test", "/", "")
	if r.code != 200 || len(r.body) != size {
		t.Fatalf("answer %d with %d bytes", r.code, len(r.body))
	}
	log.line(r.headers["x-request-id"]).check(t, "streamed", map[string]any{"status": 200, "bytes_out": size, "end": "ok"})

	// A backend that stops sending: cut by the backend timeout.
	stall := startStallBackend(t, true)
	cfg = configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: stall.addr}}, tieBreakID)
	cfg.Proxy.BackendTimeout = 200 * time.Millisecond
	e, log = logEnv(t, cfg, "b1")
	rc := dialRaw(t, e.ln, nil)
	if _, err := rc.c.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\nX-Request-Id: stalled\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, rc.c, rc.br)
	l := log.line("stalled")
	l.check(t, "stalled", map[string]any{"status": 200, "end": "backend_timeout"})
	if got := l["bytes_out"].(float64); got < 70000 || got >= 1000000 {
		t.Errorf("stalled: bytes_out %v, want the 70000 sent before the stall", got)
	}
}

// TestAccessLogRelays: a streamed body of unknown length goes to an HTTP/1.0 client on the
// hijacked connection (relayUntilClose); its line comes when the relay ends, whole (ok), or cut
// by client_timeout when the client stops reading (client_timeout). A chunked body to an
// HTTP/1.1 client whose client goes away mid-body ends client_gone.
func TestAccessLogRelays(t *testing.T) {
	const size = 200000
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		n := int64(size)
		if string(ctx.Path()) == "/endless" {
			n = 1 << 40 // far more than the pipes hold
		}
		ctx.SetBodyStream(&pattern{n: n}, -1)
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	cfg.Proxy.ClientTimeout = 200 * time.Millisecond
	e, log := logEnv(t, cfg, "b1")

	rc := dialRaw(t, e.ln, nil)
	if _, err := rc.c.Write([]byte("GET /whole HTTP/1.0\r\nHost: shop.test\r\nX-Request-Id: relay-whole\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, rc.c, rc.br)
	log.line("relay-whole").check(t, "relay, whole", map[string]any{"status": 200, "proto": "HTTP/1.0", "bytes_out": size, "end": "ok"})

	rc = dialRaw(t, e.ln, nil)
	if _, err := rc.c.Write([]byte("GET /endless HTTP/1.0\r\nHost: shop.test\r\nX-Request-Id: relay-stalled\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing and stays connected: client_timeout ends the relay.
	log.line("relay-stalled").check(t, "relay, stalled", map[string]any{"status": 200, "end": "client_timeout"})

	addr := e.serveTCP(t)
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("GET /endless HTTP/1.1\r\nHost: shop.test\r\nX-Request-Id: chunked-gone\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 100000)); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	l := log.line("chunked-gone")
	l.check(t, "chunked, client gone", map[string]any{"status": 200, "end": "client_gone"})
	if got := l["bytes_out"].(float64); got < 50000 {
		t.Errorf("chunked, client gone: bytes_out %v, want at least the bytes read", got)
	}
	e.waitIdle()
}

// TestAccessLogClientGone: a client that goes away while its request is with the backend gets
// a line without a status, ended client_gone.
func TestAccessLogClientGone(t *testing.T) {
	sb := startStallBackend(t, false)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: sb.addr}}, tieBreakID)
	e, log := logEnv(t, cfg, "b1")
	addr := e.serveTCP(t)
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: shop.test\r\nX-Request-Id: leaving\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-sb.arrived
	_ = c.Close()
	log.line("leaving").check(t, "client gone", map[string]any{"status": nil, "end": "client_gone", "attempts": 1,
		"backend": "b1", "client_ip": "127.0.0.1"})
}

// TestAccessLogUpgrade: an upgraded connection's line comes when it closes, with the 101 and
// the bytes copied each way.
func TestAccessLogUpgrade(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: wsBackendAddr(t)}}, tieBreakID)
	e, log := logEnv(t, cfg, "b1")
	c, err := e.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(strings.Replace(wsHandshake, "\r\n\r\n", "\r\nX-Request-Id: ws-1\r\n\r\n", 1))); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got string
	for !strings.HasSuffix(got, "first") {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("read %q: %v", got, err)
		}
		got += string(buf[:n])
	}
	if !strings.HasPrefix(got, "HTTP/1.1 101 ") || !strings.Contains(got, "\r\nX-Request-Id: ws-1\r\n") {
		t.Fatalf("the 101 is %q, want it to carry X-Request-Id: ws-1", got)
	}
	if _, err := c.Write([]byte("ping!")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ping!" {
		t.Fatalf("echo %q, %v", buf[:n], err)
	}
	// Still open: no line yet, though a later request's line is written.
	r := e.do("GET", "nowhere.test", "/", "")
	log.line(r.headers["x-request-id"])
	for _, l := range log.lines() {
		if l["request_id"] == "ws-1" {
			t.Fatalf("a line for the upgraded connection while it is open: %v", l)
		}
	}
	_ = c.Close()
	l := log.line("ws-1")
	l.check(t, "upgrade", map[string]any{"status": 101, "end": "upgrade_closed", "bytes_in": 5,
		"bytes_out": len("first") + len("ping!"), "backend": "b1", "attempts": 1})
}

// TestAccessLogHeaderTimeout: the scanner's 408 is logged, with a new ID that the answer
// carries too.
func TestAccessLogHeaderTimeout(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	cfg.Proxy.HeaderTimeout = 200 * time.Millisecond
	e, log := logEnv(t, cfg, "b1")
	rc := dialRaw(t, e.ln, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 5), Port: 40000})
	if _, err := rc.c.Write([]byte("GET / HTTP/1.1\r\nHost: sho")); err != nil {
		t.Fatal(err)
	}
	r := rc.exchange("")
	if r.code != 408 {
		t.Fatalf("answer %v, want 408", r)
	}
	l := log.line(r.headers["x-request-id"])
	l.check(t, "header timeout", map[string]any{"status": 408, "reason": reasonRequestTimeout, "end": "refused",
		"client_ip": "127.0.0.5", "method": nil})
	if ms := l["duration_ms"].(float64); ms < 150 {
		t.Errorf("duration_ms %v, want about the 200 ms header timeout", ms)
	}
}
