package main

// End-to-end: what a client claims or asks for at the edge, with the real binary — spoofed
// client-identity headers, CONNECT, Expect: 100-continue with an oversized body, and request
// smuggling attempts.

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// seenByBackend sends a GET /_backend/headers through pollbal with the given headers and
// returns the headers the backend received.
func seenByBackend(t *testing.T, pb *instance, headers map[string]string) http.Header {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+pb.listen+"/_backend/headers", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "shop.test"
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("answer %d %q", resp.StatusCode, b)
	}
	var seen struct {
		Headers http.Header `json:"headers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil {
		t.Fatal(err)
	}
	return seen.Headers
}

// TestEndToEndClientIdentityHeaders: X-Real-IP, Forwarded and the X-Forwarded-* a client sent
// are replaced by what pollbal saw when the client is not a trusted proxy, and kept
// (X-Forwarded-For appended to) when 127.0.0.1/32 is in proxy.trusted_proxies.
func TestEndToEndClientIdentityHeaders(t *testing.T) {
	spoofed := map[string]string{
		"X-Real-IP":         "9.9.9.9",
		"Forwarded":         "for=8.8.8.8",
		"X-Forwarded-For":   "7.7.7.7",
		"X-Forwarded-Host":  "evil.test",
		"X-Forwarded-Proto": "https",
	}
	tests := []struct {
		name      string
		proxyKeys string
		want      map[string]string // "" = absent
	}{
		{name: "untrusted client", proxyKeys: "{}", want: map[string]string{
			"X-Real-IP": "127.0.0.1", "Forwarded": "", "X-Forwarded-For": "127.0.0.1",
			"X-Forwarded-Host": "shop.test", "X-Forwarded-Proto": "http"}},
		{name: "trusted proxy elsewhere", proxyKeys: "{trusted_proxies: [10.0.0.0/8, \"::1\"]}", want: map[string]string{
			"X-Real-IP": "127.0.0.1", "Forwarded": "", "X-Forwarded-For": "127.0.0.1",
			"X-Forwarded-Host": "shop.test", "X-Forwarded-Proto": "http"}},
		{name: "client is a trusted proxy", proxyKeys: "{trusted_proxies: [127.0.0.1/32]}", want: map[string]string{
			"X-Real-IP": "9.9.9.9", "Forwarded": "for=8.8.8.8", "X-Forwarded-For": "7.7.7.7, 127.0.0.1",
			"X-Forwarded-Host": "evil.test", "X-Forwarded-Proto": "https"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pb, _ := startSingle(t, tt.proxyKeys, "")
			got := seenByBackend(t, pb, spoofed)
			for k, want := range tt.want {
				if v := got.Values(k); (want == "" && len(v) != 0) || (want != "" && (len(v) != 1 || v[0] != want)) {
					t.Errorf("backend saw %s: %q, want %q (all: %v)", k, v, want, got)
				}
			}
			// A client that sends none still gets them set.
			plain := seenByBackend(t, pb, nil)
			if plain.Get("X-Real-IP") != "127.0.0.1" || plain.Get("X-Forwarded-For") != "127.0.0.1" || plain.Get("X-Forwarded-Proto") != "http" {
				t.Errorf("without client headers the backend saw %v", plain)
			}
		})
	}
}

// TestEndToEndTrustedProxiesValidated: a trusted_proxies entry that is not a network, or that
// would trust more than it says, stops pollbal check with a clear error.
func TestEndToEndTrustedProxiesValidated(t *testing.T) {
	cfg := fillAddrs(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
services: {web: {}}
apps:
  - {name: www, hosts: ["*"]}
backends:
  - {id: web-1, address: 127.0.0.1:1}
proxy: {trusted_proxies: [10.1.2.3/16, proxy.local]}
`, testproc.FreeAddr(t), testproc.FreeAddr(t))
	path := filepath.Join(t.TempDir(), "pollbal.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins.pollbal, "check", "-config", path).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("pollbal check: %v, want exit status 1; output %q", err, out)
	}
	for _, want := range []string{
		`proxy.trusted_proxies[0]: "10.1.2.3/16" has address bits past its /16: write 10.1.0.0/16 for the network, or 10.1.2.3/32 for the one address`,
		`proxy.trusted_proxies[1]: "proxy.local" is not a CIDR such as 10.0.0.0/8 or an IP address`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("pollbal check output %q lacks %q", out, want)
		}
	}
}

// canary is a 127.0.0.1 listener that counts the connections it gets: a host named in a
// request that must never be connected to.
func canary(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	return testproc.ServeLocal(t, func(net.Conn) { hits.Add(1) }), hits
}

// TestEndToEndConnectRefused: CONNECT gets 405 method_not_allowed, the connection is closed,
// and neither the backend nor the host it names sees anything.
func TestEndToEndConnectRefused(t *testing.T) {
	pb, be := startSingle(t, "{}", "")
	target, hits := canary(t)
	before := be.stats(t).Requests
	for _, raw := range []string{
		"CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
		"CONNECT " + be.addr + " HTTP/1.1\r\nHost: " + be.addr + "\r\n\r\n\x16\x03\x01\x00\x04abcd",
	} {
		rc := dialProxy(t, pb, raw)
		resp, body := rc.readAnswer(t)
		if resp.StatusCode != 405 || resp.Header.Get("X-Pollbal-Reason") != "method_not_allowed" || resp.Header.Get("Allow") == "" {
			t.Errorf("CONNECT answered %d %v %q, want 405 method_not_allowed with Allow", resp.StatusCode, resp.Header, body)
		}
		if rest := rc.readClosed(t); rest != "" {
			t.Errorf("after the 405: %q, want the connection closed", rest)
		}
	}
	if n := be.stats(t).Requests - before; n != 0 {
		t.Errorf("backend received %d requests, want 0", n)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the CONNECT target got %d connections, want 0", n)
	}
	if n, _ := metrictest.TextValue(t, pb.metrics(t), `pollbal_requests_total{app="www",code="405"}`); n != 2 {
		t.Errorf(`pollbal_requests_total{app="www",code="405"} = %v, want 2`, n)
	}
}

// TestEndToEndExpectContinueTooLarge: a request announcing a 200 MiB body with
// "Expect: 100-continue" gets 413 body_too_large at once, with no "100 Continue" before it;
// one within the limit gets "100 Continue" and is forwarded.
func TestEndToEndExpectContinueTooLarge(t *testing.T) {
	pb, be := startSingle(t, "{max_request_body: 1048576}", "")
	before := be.stats(t).Requests

	began := time.Now()
	rc := dialProxy(t, pb, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 209715200\r\nExpect: 100-continue\r\n\r\n")
	resp, body := rc.readAnswer(t) // a 100 Continue would be this first answer
	if resp.StatusCode != 413 || resp.Header.Get("X-Pollbal-Reason") != "body_too_large" {
		t.Fatalf("first answer %d %v %q, want 413 body_too_large", resp.StatusCode, resp.Header, body)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("413 took %v", took)
	}
	if rest := rc.readClosed(t); rest != "" {
		t.Errorf("after the 413: %q, want the connection closed", rest)
	}

	rc = dialProxy(t, pb, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, _ = rc.readAnswer(t)
	if resp.StatusCode != 100 {
		t.Fatalf("within the limit: first answer %d, want 100 Continue", resp.StatusCode)
	}
	if _, err := rc.c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	resp, body = rc.readAnswer(t)
	if resp.StatusCode != 200 || body != "web-1\n" {
		t.Errorf("within the limit: %d %q, want the backend's 200", resp.StatusCode, body)
	}
	if n := be.stats(t).Requests - before; n != 1 {
		t.Errorf("backend received %d requests, want 1 (the one within the limit)", n)
	}
}

// TestEndToEndSmugglingRefused: the request-smuggling attempts pollbal must keep refusing —
// Content-Length with Transfer-Encoding, duplicate Content-Length, obfuscated
// Transfer-Encoding, NUL, bare CR — each get 400 bad_request, close the connection, and reach
// no backend.
func TestEndToEndSmugglingRefused(t *testing.T) {
	pb, be := startSingle(t, "{}", "")
	before := be.stats(t).Requests
	const head = "POST / HTTP/1.1\r\nHost: shop.test\r\n"
	tests := []struct {
		name      string
		request   string
		halfClose bool // the request never ends by itself: pollbal answers at the end of input
	}{
		{name: "CL.TE", request: head + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"},
		{name: "TE.CL", request: head + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\nContent-Length: 15\r\n\r\nx=1\r\n0\r\n\r\n"},
		{name: "CL and TE with an empty chunked body", request: head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{name: "duplicate Content-Length", request: head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{name: "Content-Length list", request: head + "Content-Length: 5, 5\r\n\r\nhello"},
		{name: "Transfer-Encoding: xchunked", request: head + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "space before the colon", request: head + "Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "coding list", request: head + "Transfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "two Transfer-Encoding lines", request: head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "NUL in a header", request: head + "X-A: a\x00b\r\nContent-Length: 0\r\n\r\n"},
		{name: "NUL in the target", request: "GET /\x00 HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
		{name: "bare CR in a header", request: head + "X-A: a\rb\r\nContent-Length: 0\r\n\r\n"},
		{name: "bare CR line ends", request: "GET / HTTP/1.1\rHost: shop.test\r\r", halfClose: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialProxy(t, pb, tt.request)
			if tt.halfClose {
				if err := rc.c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			resp, body := rc.readAnswer(t)
			if resp.StatusCode != 400 || resp.Header.Get("X-Pollbal-Reason") != "bad_request" {
				t.Fatalf("answer %d %v %q, want 400 bad_request", resp.StatusCode, resp.Header, body)
			}
			if rest := rc.readClosed(t); rest != "" {
				t.Errorf("after the 400: %q, want the connection closed", rest)
			}
		})
	}
	if n := be.stats(t).Requests - before; n != 0 {
		t.Errorf("backend received %d requests, want 0", n)
	}
}
