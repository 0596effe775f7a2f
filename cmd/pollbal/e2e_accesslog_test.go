package main

// End-to-end: the access log of the real binary in front of the example backend. Every field of
// a served, a refused, a no-app, a TLS, a streamed and a WebSocket request; request IDs and
// trace context; the filters and sampling; a reload that moves the log and changes its format;
// SIGUSR1 after logrotate's rename; the combined format; /dev/full; a closed standard output;
// `pollbal check` opening the file.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"pollbal/internal/accesslog/accesslogtest"
	"pollbal/internal/certs/certstest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// accessSetup is the example backend web-1 behind app www (www.test), app ghost bound to a
// pool without backends (503 pool_exhausted), a TLS listener for www.test next to the plain
// one, and pollbal with an access_log section.
type accessSetup struct {
	pb      *instance
	be      *backend
	dir     string // the test's directory: DIR in the access_log section
	tlsAddr string
	pair    certstest.Pair
}

// accessConfig is the setup's configuration with the given access_log and proxy sections (YAML
// flow mappings).
func (s *accessSetup) config(accessLog, proxyKeys string) string {
	return strings.ReplaceAll(fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {}}
apps:
  - {name: www, hosts: ["www.test"]}
  - {name: ghost, hosts: ["ghost.test"], pool: pool-ghost}
backends:
  - {id: web-1, address: %s}
tls:
  listen: %s
  certificates: [{cert_file: %s, key_file: %s}]
proxy: %s
access_log: %s
`, s.be.addr, s.tlsAddr, s.pair.CertFile, s.pair.KeyFile, proxyKeys, accessLog), "DIR", s.dir)
}

func startAccessSetup(t *testing.T, accessLog, proxyKeys string) *accessSetup {
	t.Helper()
	s := &accessSetup{dir: t.TempDir(), tlsAddr: testproc.FreeAddr(t)}
	s.pair = certstest.Write(t, s.dir, "www", certstest.Options{}, "www.test")
	s.be = startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	s.pb = startPollbal(t, s.config(accessLog, proxyKeys))
	testproc.WaitFor(t, 10*time.Second, "web-1 ready", func() bool {
		ready, _, _, _ := s.pb.state(t).backend("web-1")
		return ready
	})
	return s
}

// reload writes a new configuration and reloads it with SIGHUP; it returns once pollbal says it
// reloaded.
func (s *accessSetup) reload(t *testing.T, cfg string) {
	t.Helper()
	before := strings.Count(s.pb.Stderr(), "configuration reloaded")
	writeInPlace(t, s.pb.cfgPath, fillAddrs(cfg, s.pb.listen, s.pb.admin))
	s.pb.Signal(t, syscall.SIGHUP)
	s.pb.WaitFor(t, 10*time.Second, "the reload", func() bool {
		return strings.Count(s.pb.Stderr(), "configuration reloaded") > before
	})
}

// get sends one request through pollbal's plain listener for host, with headers (name, value
// pairs), and returns the answer with its body read.
func (s *accessSetup) get(t *testing.T, method, host, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	return send(t, http.DefaultClient, method, "http://"+s.pb.listen+path, host, body, headers...)
}

func send(t *testing.T, c *http.Client, method, url, host, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, url, host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, string(b)
}

// accessLine is one JSON line of the access log.
type accessLine map[string]any

// readAccessLog returns the whole lines of the file at path (a line still being written is
// left for the next read); none when the file does not exist yet.
func readAccessLog(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	} else {
		return nil
	}
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// jsonLines parses JSON lines.
func jsonLines(t *testing.T, lines []string) []accessLine {
	t.Helper()
	out := make([]accessLine, 0, len(lines))
	for _, text := range lines {
		var l accessLine
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			t.Fatalf("access log line %q: %v", text, err)
		}
		out = append(out, l)
	}
	return out
}

// waitLines waits until the JSON log at path holds a line for each of ids (the writer writes at
// least every second) and returns those lines by request_id; each id must have one line.
func waitLines(t *testing.T, path string, ids ...string) map[string]accessLine {
	t.Helper()
	byID := map[string]accessLine{}
	count := map[string]int{}
	testproc.WaitFor(t, 15*time.Second, fmt.Sprintf("lines for %v in %s", ids, filepath.Base(path)), func() bool {
		clear(byID)
		clear(count)
		for _, l := range jsonLines(t, readAccessLog(t, path)) {
			id, _ := l["request_id"].(string)
			byID[id] = l
			count[id]++
		}
		for _, id := range ids {
			if count[id] == 0 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("%d lines for request %s, want 1", count[id], id)
		}
	}
	return byID
}

// check compares the fields of l named in want, as accesslogtest.Check does.
func (l accessLine) check(t *testing.T, what string, want map[string]any) {
	t.Helper()
	accesslogtest.Check(t, what, l, want)
}

// positive checks that each named field is a number above 0 and at most max (when max > 0).
func (l accessLine) positive(t *testing.T, what string, max float64, keys ...string) {
	t.Helper()
	for _, k := range keys {
		v, ok := l[k].(float64)
		if !ok || v <= 0 || (max > 0 && v > max) {
			t.Errorf("%s: %s = %v, want a number above 0 and at most %v", what, k, l[k], max)
		}
	}
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestEndToEndAccessLogFields: a served, a refused (pool_exhausted), a no-app and a TLS request
// each get one JSON line with every field that applies to it, right.
func TestEndToEndAccessLogFields(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log, headers: ["Referer", "User-Agent"]}`, `{trusted_proxies: ["127.0.0.0/8"]}`)
	path := filepath.Join(s.dir, "access.log")
	began := time.Now()

	served, body := s.get(t, "POST", "www.test", "/cart?id=42", "hello",
		"User-Agent", "e2e-agent/1", "Referer", "https://www.test/", "X-Forwarded-For", "203.0.113.7")
	if served.StatusCode != 200 || body != "web-1\n" {
		t.Fatalf("served: %d %q", served.StatusCode, body)
	}
	refused, refusedBody := s.get(t, "GET", "ghost.test", "/", "")
	noApp, noAppBody := s.get(t, "GET", "nowhere.test", "/x", "")
	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "www.test", RootCAs: certstest.Pool(s.pair), MaxVersion: tls.VersionTLS12}}}
	overTLS, _ := send(t, tlsClient, "GET", "https://"+s.tlsAddr+"/", "www.test", "")

	ids := make([]string, 0, 4)
	for _, r := range []*http.Response{served, refused, noApp, overTLS} {
		id := r.Header.Get("X-Request-Id")
		if !hex32.MatchString(id) {
			t.Fatalf("answer %d carries X-Request-Id %q, want 32 hex digits", r.StatusCode, id)
		}
		ids = append(ids, id)
	}
	lines := waitLines(t, path, ids...)
	ended := time.Now()

	l := lines[ids[0]]
	l.check(t, "served", map[string]any{
		"request_id": ids[0], "trace_id": nil, "client_ip": "203.0.113.7", "method": "POST", "host": "www.test",
		"uri": "/cart?id=42", "proto": "HTTP/1.1", "tls": nil, "status": 200, "bytes_in": 5, "bytes_out": 6,
		"queue_ms": 0, "app": "www", "service": "web", "pool": "default", "resolution": "default", "fallback": false,
		"backend": "web-1", "backend_address": s.be.addr, "attempts": 1, "refusals": 0, "reason": nil, "end": "ok",
		"referer": "https://www.test/", "user_agent": "e2e-agent/1",
	})
	limit := float64(ended.Sub(began).Milliseconds() + 1)
	l.positive(t, "served", limit, "duration_ms", "upstream_ms")
	if l["upstream_ms"].(float64) > l["duration_ms"].(float64) {
		t.Errorf("served: upstream_ms %v above duration_ms %v", l["upstream_ms"], l["duration_ms"])
	}
	ts, err := time.Parse("2006-01-02T15:04:05.000Z07:00", fmt.Sprint(l["time"]))
	if err != nil || ts.Before(began.Add(-time.Millisecond).Truncate(time.Millisecond)) || ts.After(ended) || ts.Location() != time.UTC {
		t.Errorf("served: time %v (%v), want RFC 3339 in UTC with ms between %v and %v", l["time"], err, began, ended)
	}

	lines[ids[1]].check(t, "pool exhausted", map[string]any{
		"client_ip": "127.0.0.1", "method": "GET", "host": "ghost.test", "uri": "/", "status": 503, "bytes_in": 0,
		"bytes_out": len(refusedBody), "queue_ms": 0, "app": "ghost", "service": "web", "pool": "pool-ghost",
		"resolution": "explicit", "fallback": false, "backend": nil, "backend_address": nil, "upstream_ms": nil,
		"attempts": 0, "refusals": 0, "reason": "pool_exhausted", "end": "refused", "referer": nil, "user_agent": "Go-http-client/1.1",
	})
	lines[ids[2]].check(t, "no app", map[string]any{
		"host": "nowhere.test", "uri": "/x", "status": 404, "bytes_out": len(noAppBody), "reason": "no_app", "end": "refused",
		"app": nil, "service": nil, "pool": nil, "resolution": nil, "fallback": nil, "attempts": nil, "refusals": nil,
		"queue_ms": nil, "backend": nil,
	})
	lines[ids[2]].positive(t, "no app", limit, "duration_ms")
	lines[ids[3]].check(t, "over TLS", map[string]any{
		"tls": map[string]any{"version": "1.2", "sni": "www.test"}, "status": 200, "backend": "web-1", "end": "ok",
		"proto": "HTTP/1.1",
	})
}

// TestEndToEndAccessLogRequestIDs: a valid X-Request-Id is kept, an invalid one replaced, a
// missing one made (32 hex digits); each goes to the backend, back on the answer (pollbal's own
// too) and into the line. A traceparent goes to the backend unchanged; its trace-id is logged
// only when it is valid.
func TestEndToEndAccessLogRequestIDs(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	const (
		validTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		invalidTP = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01" // upper case
	)
	// seen asks the backend what arrived, through pollbal.
	seen := func(t *testing.T, headers ...string) (resp *http.Response, id, tp string) {
		t.Helper()
		resp, body := s.get(t, "GET", "www.test", "/_backend/headers", "", headers...)
		var got struct{ Headers http.Header }
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("%d %q: %v", resp.StatusCode, body, err)
		}
		if n := len(got.Headers.Values("X-Request-Id")); n != 1 {
			t.Errorf("the backend got %d X-Request-Id headers, want 1", n)
		}
		return resp, got.Headers.Get("X-Request-Id"), got.Headers.Get("Traceparent")
	}

	resp, id, tp := seen(t, "X-Request-Id", "order-7f3a/retry:2", "traceparent", validTP)
	if id != "order-7f3a/retry:2" || resp.Header.Get("X-Request-Id") != id || tp != validTP {
		t.Errorf("a valid ID: backend saw %q (traceparent %q), answer has %q; want both the client's, the traceparent unchanged",
			id, tp, resp.Header.Get("X-Request-Id"))
	}
	kept := id

	resp, id, tp = seen(t, "X-Request-Id", "two words", "traceparent", invalidTP)
	if !hex32.MatchString(id) || resp.Header.Get("X-Request-Id") != id || tp != invalidTP {
		t.Errorf("an invalid ID: backend saw %q (traceparent %q), answer has %q; want one new ID, the traceparent unchanged",
			id, tp, resp.Header.Get("X-Request-Id"))
	}
	replaced := id

	resp, id, _ = seen(t)
	if !hex32.MatchString(id) || resp.Header.Get("X-Request-Id") != id || id == replaced {
		t.Errorf("no ID: backend saw %q, answer has %q; want one new ID", id, resp.Header.Get("X-Request-Id"))
	}
	made := id

	own, _ := s.get(t, "GET", "ghost.test", "/", "", "X-Request-Id", strings.Repeat("z", 201))
	ownID := own.Header.Get("X-Request-Id")
	if own.StatusCode != 503 || !hex32.MatchString(ownID) {
		t.Errorf("pollbal's own 503 for a 201-byte ID carries X-Request-Id %q, want a new one", ownID)
	}
	noApp, _ := s.get(t, "GET", "nowhere.test", "/", "", "X-Request-Id", "lost-42")
	if noApp.Header.Get("X-Request-Id") != "lost-42" {
		t.Errorf("pollbal's own 404 carries X-Request-Id %q, want the client's lost-42", noApp.Header.Get("X-Request-Id"))
	}

	lines := waitLines(t, path, kept, replaced, made, ownID, "lost-42")
	lines[kept].check(t, "kept", map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "status": 200})
	lines[replaced].check(t, "replaced", map[string]any{"trace_id": nil, "status": 200})
	lines[made].check(t, "made", map[string]any{"trace_id": nil})
	lines[ownID].check(t, "own 503", map[string]any{"reason": "pool_exhausted"})
	lines["lost-42"].check(t, "own 404", map[string]any{"reason": "no_app"})
}

// TestEndToEndAccessLogStream: a streamed body's line is written after its last byte (not while
// the client still reads it, though later requests' lines are), with every byte counted.
func TestEndToEndAccessLogStream(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	const size = 8 << 20
	req, err := http.NewRequest("GET", fmt.Sprintf("http://%s/blob?size=%d", s.pb.listen, size), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "www.test"
	req.Header.Set("X-Request-Id", "stream-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "stream-1" {
		t.Fatalf("answer %d with X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	// The client holds the rest: a later request's line is written, the stream's is not.
	marker, _ := s.get(t, "GET", "nowhere.test", "/", "")
	waitLines(t, path, marker.Header.Get("X-Request-Id"))
	for _, l := range jsonLines(t, readAccessLog(t, path)) {
		if l["request_id"] == "stream-1" {
			t.Fatalf("the stream has its line before its last byte was read: %v", l)
		}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != size-(1<<20) {
		t.Fatalf("read %d more bytes, %v", n, err)
	}
	l := waitLines(t, path, "stream-1")["stream-1"]
	l.check(t, "stream", map[string]any{"status": 200, "bytes_out": size, "end": "ok", "backend": "web-1", "uri": fmt.Sprintf("/blob?size=%d", size)})
}

// TestEndToEndAccessLogWebSocket: a WebSocket's line is written when it closes, with the 101,
// end upgrade_closed and the bytes both ways; the 101 carries the request's ID.
func TestEndToEndAccessLogWebSocket(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws://"+s.pb.listen+"/ws", &websocket.DialOptions{
		Host: "www.test", HTTPHeader: http.Header{"X-Request-Id": {"ws-e2e-1"}}})
	if err != nil {
		t.Fatalf("dial through pollbal: %v", err)
	}
	defer c.CloseNow()
	if resp.Header.Get("X-Request-Id") != "ws-e2e-1" {
		t.Errorf("the 101 carries X-Request-Id %q, want ws-e2e-1", resp.Header.Get("X-Request-Id"))
	}
	msgs := []string{"hello", strings.Repeat("0123456789", 1000), "bye"}
	sent := 0
	for _, msg := range msgs {
		echo(t, ctx, c, msg)
		sent += len(msg)
	}
	marker, _ := s.get(t, "GET", "nowhere.test", "/", "")
	waitLines(t, path, marker.Header.Get("X-Request-Id"))
	for _, l := range jsonLines(t, readAccessLog(t, path)) {
		if l["request_id"] == "ws-e2e-1" {
			t.Fatalf("the WebSocket has its line while it is open: %v", l)
		}
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatalf("close: %v", err)
	}
	l := waitLines(t, path, "ws-e2e-1")["ws-e2e-1"]
	l.check(t, "websocket", map[string]any{"status": 101, "end": "upgrade_closed", "uri": "/ws", "backend": "web-1", "attempts": 1})
	// Each frame has a 2 to 14 byte head; the client's are masked; the close frames come on top.
	for _, k := range []string{"bytes_in", "bytes_out"} {
		v, _ := l[k].(float64)
		if v < float64(sent) || v > float64(sent+14*(len(msgs)+1)+125) {
			t.Errorf("websocket: %s = %v, want the %d bytes of the messages plus their frames", k, l[k], sent)
		}
	}
}

// TestEndToEndAccessLogFilters: statuses (a class, any case) with min_duration widening it, then
// after a reload other statuses; pollbal's own answers and 5xx are logged whatever the filters.
func TestEndToEndAccessLogFilters(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log, statuses: ["4XX"], min_duration: 300ms}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	id := func(name string) []string { return []string{"X-Request-Id", name} }
	s.get(t, "GET", "www.test", "/", "", id("fast-200")...)
	s.get(t, "GET", "www.test", "/status?code=404", "", id("backend-404")...)
	s.get(t, "GET", "www.test", "/status?code=418", "", id("backend-418")...)
	s.get(t, "GET", "www.test", "/blob?size=10&hold=400ms", "", id("slow-200")...)
	s.get(t, "GET", "www.test", "/status?code=500", "", id("backend-500")...)
	s.get(t, "GET", "ghost.test", "/", "", id("own-503")...)
	lines := waitLines(t, path, "backend-404", "backend-418", "slow-200", "backend-500", "own-503")
	if _, ok := lines["fast-200"]; ok {
		t.Error("a fast 200 was logged with statuses [4XX]")
	}

	s.reload(t, s.config(`{path: DIR/access.log, statuses: ["2xx"]}`, `{}`))
	s.get(t, "GET", "www.test", "/status?code=404", "", id("backend-404-later")...)
	s.get(t, "GET", "www.test", "/", "", id("fast-200-later")...)
	s.get(t, "GET", "nowhere.test", "/", "", id("own-404-later")...)
	s.get(t, "GET", "www.test", "/status?code=503", "", id("backend-503-later")...)
	lines = waitLines(t, path, "fast-200-later", "own-404-later", "backend-503-later")
	if _, ok := lines["backend-404-later"]; ok {
		t.Error("a backend's 404 was logged with statuses [2xx]")
	}
	lines["backend-503-later"].check(t, "backend 503", map[string]any{"status": 503, "reason": nil, "end": "ok"})
}

// TestEndToEndAccessLogSampling: with sample 0.3 about 30% of 3,000 served requests are logged,
// and every one of pollbal's own answers and of the backend's 5xx is.
//
// The number of served requests logged is binomial (n = 3000, p = 0.3): mean 900, standard
// deviation sqrt(3000 × 0.3 × 0.7) ≈ 25.1. The test accepts 5 standard deviations either way
// (774 to 1026): a correct sampler fails it about once in two million runs, while one that keeps
// 25% or 35% (750, 1050 on average) fails it nearly always.
func TestEndToEndAccessLogSampling(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log, sample: 0.3}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	const served, own, errors5xx, p = 3000, 200, 100, 0.3
	type job struct{ host, path, id string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	client := loadClient(4)
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				req, err := http.NewRequest("GET", "http://"+s.pb.listen+j.path, nil)
				if err != nil {
					t.Error(err)
					continue
				}
				req.Host = j.host
				req.Header.Set("X-Request-Id", j.id)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("%s: %v", j.id, err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.Header.Get("X-Request-Id") != j.id {
					t.Errorf("%s: answer %d with X-Request-Id %q", j.id, resp.StatusCode, resp.Header.Get("X-Request-Id"))
				}
			}
		})
	}
	var always []string
	for i := range served {
		jobs <- job{"www.test", "/", fmt.Sprintf("served-%d", i)}
		if i < own {
			id := fmt.Sprintf("own-%d", i)
			always = append(always, id)
			jobs <- job{"nowhere.test", "/", id}
		}
		if i < errors5xx {
			id := fmt.Sprintf("5xx-%d", i)
			always = append(always, id)
			jobs <- job{"www.test", "/status?code=502", id}
		}
	}
	close(jobs)
	wg.Wait()
	// Every request has ended: once the line of one more (always logged) is written, every
	// line before it is.
	s.get(t, "GET", "nowhere.test", "/", "", "X-Request-Id", "last")
	lines := waitLines(t, path, append(always, "last")...)
	logged := 0
	for id := range lines {
		if strings.HasPrefix(id, "served-") {
			logged++
		}
	}
	mean, sd := served*p, math.Sqrt(served*p*(1-p))
	t.Logf("%d of %d served requests logged (expected %.0f ± %.1f)", logged, served, mean, sd)
	if math.Abs(float64(logged)-mean) > 5*sd {
		t.Errorf("%d of %d served requests logged with sample %v, want within %.0f ± %.0f", logged, served, p, mean, 5*sd)
	}
}

// combinedRe is NGINX's combined format, as log parsers read it, followed by pollbal's
// key=value fields.
var combinedRe = regexp.MustCompile(`^(\S+) - (\S+) \[(\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] ` +
	`"((?:[^"\\]|\\.)*)" (\d{3}) (\d+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"` +
	` rid=(\S+) app=(\S+) pool=(\S+) backend=(\S+) attempts=(\d+) queue_ms=(\d+(?:\.\d+)?) duration_ms=(\d+(?:\.\d+)?)` +
	` end=(ok|client_gone|client_timeout|backend_timeout|backend_error|refused|upgrade_closed)$`)

// TestEndToEndAccessLogReload: a reload moves the log to another file and to the combined format
// without a restart: the lines before it stay in the first file as JSON, the ones after are in
// the second, each an NGINX combined line. A reload whose new file cannot be opened is rejected
// whole.
func TestEndToEndAccessLogReload(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/a.log}`, `{}`)
	first, second := filepath.Join(s.dir, "a.log"), filepath.Join(s.dir, "b.log")
	pid := s.pb.Pid()
	for i := range 3 {
		s.get(t, "GET", "www.test", "/", "", "X-Request-Id", fmt.Sprintf("before-%d", i))
	}
	s.reload(t, s.config(`{path: DIR/b.log, format: combined}`, `{}`))
	s.get(t, "POST", "www.test", "/path?q=1", "body", "X-Request-Id", "after-0", "Referer", "https://r.test/",
		"User-Agent", `agent "quoted"`)
	s.get(t, "GET", "ghost.test", "/", "", "X-Request-Id", "after-1")
	var lines []string
	testproc.WaitFor(t, 15*time.Second, "two lines in b.log", func() bool {
		lines = readAccessLog(t, second)
		return len(lines) >= 2
	})
	if s.pb.Pid() != pid || s.pb.Exited() {
		t.Fatal("pollbal restarted")
	}
	old := jsonLines(t, readAccessLog(t, first))
	if len(old) != 3 {
		t.Errorf("a.log has %d lines, want the 3 from before the reload", len(old))
	}
	for i, l := range old {
		if l["request_id"] != fmt.Sprintf("before-%d", i) {
			t.Errorf("a.log line %d: %v", i, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("b.log has %d lines, want the 2 from after the reload: %q", len(lines), lines)
	}
	for i, want := range []struct{ request, status, referer, agent, rid, app, pool, backend, attempts, end string }{
		{"POST /path?q=1 HTTP/1.1", "200", "https://r.test/", `agent \x22quoted\x22`, "after-0", "www", "default", "web-1", "1", "ok"},
		{"GET / HTTP/1.1", "503", "-", "Go-http-client/1.1", "after-1", "ghost", "pool-ghost", "-", "0", "refused"},
	} {
		m := combinedRe.FindStringSubmatch(lines[i])
		if m == nil {
			t.Errorf("b.log line %d does not match NGINX's combined format: %q", i, lines[i])
			continue
		}
		got := []string{m[4], m[5], m[7], m[8], m[9], m[10], m[11], m[12], m[13], m[16]}
		if strings.Join(got, "|") != strings.Join([]string{want.request, want.status, want.referer, want.agent, want.rid,
			want.app, want.pool, want.backend, want.attempts, want.end}, "|") || m[1] != "127.0.0.1" {
			t.Errorf("b.log line %d: %q", i, lines[i])
		}
	}

	// A reload to a file that cannot be opened changes nothing, the rest of the file included.
	before := rejectedCount(t, s.pb, "config_invalid")
	writeInPlace(t, s.pb.cfgPath, fillAddrs(s.config(`{path: DIR/missing/c.log}`, `{retries: 0}`), s.pb.listen, s.pb.admin))
	s.pb.Signal(t, syscall.SIGHUP)
	s.pb.WaitFor(t, 10*time.Second, "the reload rejected as config_invalid", func() bool {
		return rejectedCount(t, s.pb, "config_invalid") == before+1
	})
	if g := reloadGauge(t, s.pb); g != 0 {
		t.Errorf("pollbal_config_last_reload_successful = %v after the rejection, want 0", g)
	}
	if !strings.Contains(s.pb.Stderr(), "access_log.path") {
		t.Errorf("the rejection does not name access_log.path:\n%s", grepLines(s.pb.Stderr(), "reload rejected"))
	}
	s.get(t, "GET", "www.test", "/", "", "X-Request-Id", "after-2")
	testproc.WaitFor(t, 15*time.Second, "a third line in b.log", func() bool { return len(readAccessLog(t, second)) == 3 })
	if l := readAccessLog(t, second)[2]; !combinedRe.MatchString(l) || !strings.Contains(l, " rid=after-2 ") {
		t.Errorf("after the rejected reload, b.log's new line is %q, want after-2 in combined format", l)
	}
}

// TestEndToEndAccessLogReopen: logrotate renames the file, then SIGUSR1: the lines before the
// signal are in the renamed file (those logged between the rename and the signal included), the
// lines after it in a new file at the path, and none is lost or doubled.
func TestEndToEndAccessLogReopen(t *testing.T) {
	s := startAccessSetup(t, `{path: DIR/access.log}`, `{}`)
	path := filepath.Join(s.dir, "access.log")
	rotated := path + ".1"
	batch := func(name string, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d", name, i)
			s.get(t, "GET", "www.test", "/", "", "X-Request-Id", ids[i])
		}
		return ids
	}
	early := batch("early", 20)
	waitLines(t, path, early...)
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	between := batch("between", 20)
	before := strings.Count(s.pb.Stderr(), "access log reopened")
	s.pb.Signal(t, syscall.SIGUSR1)
	s.pb.WaitFor(t, 10*time.Second, "the reopen", func() bool {
		return strings.Count(s.pb.Stderr(), "access log reopened") > before
	})
	late := batch("late", 20)
	newLines := waitLines(t, path, late...)
	oldLines := waitLines(t, rotated, append(early, between...)...)
	if len(newLines) != len(late) || len(oldLines) != len(early)+len(between) {
		t.Errorf("the new file has %d lines, the renamed one %d; want %d and %d", len(newLines), len(oldLines), len(late), len(early)+len(between))
	}
}

// TestEndToEndAccessLogDevFull: a log that cannot be written (/dev/full) never gets in the way:
// requests are served, the failed writes are counted, and one warning says so.
func TestEndToEndAccessLogDevFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	s := startAccessSetup(t, `{path: /dev/full}`, `{}`)
	var errs float64
	testproc.WaitFor(t, 20*time.Second, "two failed writes counted", func() bool {
		if resp, body := s.get(t, "GET", "www.test", "/", ""); resp.StatusCode != 200 || body != "web-1\n" {
			t.Fatalf("answer %d %q while the log fails", resp.StatusCode, body)
		}
		errs, _ = metrictest.TextValue(t, s.pb.metrics(t), "pollbal_access_log_errors_total")
		return errs >= 2
	})
	if n := strings.Count(s.pb.Stderr(), "access log: write failed"); n != 1 {
		t.Errorf("%d warnings for %v failed writes, want 1 (at most one a minute):\n%s", n, errs,
			grepLines(s.pb.Stderr(), "access log"))
	}
	if d, _ := metrictest.TextValue(t, s.pb.metrics(t), "pollbal_access_log_dropped_total"); d != 0 {
		t.Errorf("pollbal_access_log_dropped_total = %v, want 0 (the lines failed, nothing piled up)", d)
	}
}

// TestEndToEndAccessLogClosedStdout: with path "-" and standard output a pipe whose reader has
// gone, the writes fail (EPIPE, counted) and pollbal keeps serving; SIGPIPE does not end it.
func TestEndToEndAccessLogClosedStdout(t *testing.T) {
	s := &accessSetup{dir: t.TempDir(), tlsAddr: testproc.FreeAddr(t)}
	s.pair = certstest.Write(t, s.dir, "www", certstest.Options{}, "www.test")
	s.be = startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	in := &instance{cfgPath: filepath.Join(s.dir, "pollbal.yaml"), listen: testproc.FreeAddr(t), admin: testproc.FreeAddr(t)}
	if err := os.WriteFile(in.cfgPath, []byte(fillAddrs(s.config(`{path: "-"}`, `{}`), in.listen, in.admin)), 0o644); err != nil {
		t.Fatal(err)
	}
	// `true` exits at once: pollbal's standard output is a pipe nobody reads.
	in.Proc = testproc.Start(t, "pollbal | true", testproc.Options{Group: true}, "sh", "-c", `"$0" run -config "$1" | true`,
		bins.pollbal, in.cfgPath)
	s.pb = in
	in.WaitFor(t, 15*time.Second, "/readyz", func() bool {
		resp, err := http.Get("http://" + in.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	testproc.WaitFor(t, 20*time.Second, "a failed write counted", func() bool {
		if resp, _ := s.get(t, "GET", "www.test", "/", ""); resp.StatusCode != 200 {
			t.Fatalf("answer %d", resp.StatusCode)
		}
		errs, _ := metrictest.TextValue(t, in.metrics(t), "pollbal_access_log_errors_total")
		return errs >= 1
	})
	if resp, _ := s.get(t, "GET", "www.test", "/", ""); resp.StatusCode != 200 || in.Exited() {
		t.Fatalf("pollbal stopped serving after the failed write (exited: %v)", in.Exited())
	}
	if !strings.Contains(in.Stderr(), "broken pipe") {
		t.Errorf("the warning does not say why:\n%s", grepLines(in.Stderr(), "access log"))
	}
}

// TestEndToEndAccessLogCheck: `pollbal check` opens the access log's file as run would (and so
// creates it); a path that cannot be opened is a problem for check, and run refuses to start.
func TestEndToEndAccessLogCheck(t *testing.T) {
	dir := t.TempDir()
	config := func(path string) string {
		file := filepath.Join(dir, "pollbal.yaml")
		cfg := fmt.Sprintf("site: e2e\nlisten: %s\nadmin: {listen: %s}\nservices: {web: {}}\napps: [{name: www, hosts: [\"*\"]}]\n"+
			"backends: [{id: web-1, address: 127.0.0.1:9}]\naccess_log: {path: %s}\n", testproc.FreeAddr(t), testproc.FreeAddr(t), path)
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	good := filepath.Join(dir, "logs", "access.log")
	if err := os.Mkdir(filepath.Dir(good), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins.pollbal, "check", "-config", config(good)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("check with a writable path: %v\n%s", err, out)
	}
	if _, err := os.Stat(good); err != nil {
		t.Errorf("check did not open (create) the file: %v", err)
	}

	bad := config(filepath.Join(dir, "missing", "access.log"))
	out, err = exec.Command(bins.pollbal, "check", "-config", bad).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.HasPrefix(string(out), "access_log.path: ") || !strings.Contains(string(out), "no such file or directory") {
		t.Errorf("check with a path in a missing directory: exit %d\n%s", code, out)
	}
	if out, err := exec.Command(bins.pollbal, "check", "-skip-files", "-config", bad).CombinedOutput(); err != nil {
		t.Errorf("check -skip-files opens the access log: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, bins.pollbal, "run", "-config", bad).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "access_log.path") {
		t.Errorf("run with a path in a missing directory: exit %d\n%s", code, out)
	}
}

// exitCode is a finished command's exit status (0 for a nil error, -1 when it did not run).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
