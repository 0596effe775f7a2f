package main

// End-to-end: connections to the admin port that nobody uses cannot take the descriptors that
// client traffic needs — admin.max_connections caps them, and the header and idle timeouts close
// them.

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// Requests written on raw admin connections: a complete GET kept alive; a PUT whose 17-byte
// body stops half-way (adminBodyRest completes it); and a PUT whose head stops half-way.
const (
	adminGet      = "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"
	adminHalfBody = "PUT /admin/backends/web-1/pool HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"pool\":"
	adminBodyRest = "\"canary\"}"
	adminHalfHead = "PUT /admin/backends/web-1/pool HTTP/1.1\r\nHost: admin\r\nContent-Len"
)

// dialAdminRaw opens a raw connection to pb's admin listener and writes sent. A write that fails
// because pollbal already closed the connection is not an error: what happened shows on read.
func dialAdminRaw(t *testing.T, pb *instance, sent string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", pb.admin, 5*time.Second)
	if err != nil {
		t.Fatalf("dial admin: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if sent != "" {
		if _, err := io.WriteString(c, sent); err != nil && !closedByPeer(err) {
			t.Fatal(err)
		}
	}
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// closedByPeer says whether err is what reading from or writing to a connection that the other
// side closed gives.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// answered reads one answer on rc within 10 s: true when one came, false when pollbal closed
// the connection without answering; the test fails when neither happened.
func (rc *rawConn) answered(t *testing.T) bool {
	t.Helper()
	if err := rc.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	switch {
	case err == nil:
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return true
	case closedByPeer(err):
		return false
	default:
		t.Fatalf("admin connection neither answered nor closed: %v", err)
		return false
	}
}

// adminConnections reads pollbal_admin_connections on a connection of its own, which counts.
func adminConnections(t *testing.T, pb *instance) float64 {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + pb.admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, ok := metrictest.TextValue(t, string(b), "pollbal_admin_connections")
	if !ok {
		return -1
	}
	return n
}

// Regression: 2,100 idle admin connections (after one GET /healthz, or with a PUT whose body stopped
// half-way) were never closed, took every descriptor, and no proxy client got an answer while they were open.
// Under a 1,024-descriptor limit, 2,000 such connections now leave client traffic served: past
// admin.max_connections (256 by default) they are closed at once, without an answer.
func TestEndToEndIdleAdminConnectionsLeaveProxyServed(t *testing.T) {
	const maxAdmin, idle = 256, 2000
	// Long timeouts: the connections pollbal keeps must stay for the whole test.
	pb := startLimitsSetup(t, "{header_timeout: 5m, idle_timeout: 5m}")
	// The harness's own kept-alive admin connections would take places under the cap (one that
	// pollbal has not seen closed yet may still hold one).
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	setFileLimit(t, pb.Pid(), 1024) // without the cap, 2,000 connections take them all

	conns := make([]*rawConn, idle)
	for i := range conns {
		if i%2 == 0 {
			conns[i] = dialAdminRaw(t, pb, adminGet)
		} else {
			conns[i] = dialAdminRaw(t, pb, adminHalfBody)
		}
	}
	// Client traffic is served while they are open, each request on a connection of its own.
	proxy := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 20 {
		a, err := do(t, proxy, "http://"+pb.listen+"/", "www.test")
		if err != nil || a.code != 200 {
			t.Fatalf("proxy request %d with %d admin connections open: %+v %v", i, idle, a, err)
		}
	}
	// Which ones pollbal kept: those are answered once their request is complete.
	kept := 0
	for i, rc := range conns {
		if i%2 == 1 {
			if _, err := io.WriteString(rc.c, adminBodyRest); err != nil && !closedByPeer(err) {
				t.Fatal(err)
			}
		}
		if rc.answered(t) {
			kept++
		}
	}
	t.Logf("%d of %d idle admin connections kept, the others closed at once", kept, idle)
	if kept > maxAdmin || kept < maxAdmin-4 {
		t.Errorf("%d admin connections kept, want %d (admin.max_connections)", kept, maxAdmin)
	}

	// One more, with the places taken: closed at once (every timeout is minutes away).
	start := time.Now()
	if dialAdminRaw(t, pb, adminGet).answered(t) {
		t.Errorf("admin connection past the cap was answered")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("admin connection past the cap closed after %s, want at once", took)
	}

	for _, rc := range conns {
		_ = rc.c.Close()
	}
	testproc.WaitFor(t, 20*time.Second, "the admin places to be free", func() bool { return adminConnections(t, pb) == 1 })
	if n, _ := metrictest.TextValue(t, pb.metrics(t), "pollbal_admin_connections_refused_total"); n < idle-maxAdmin {
		t.Errorf("pollbal_admin_connections_refused_total = %v, want >= %d", n, idle-maxAdmin)
	}
	if !strings.Contains(pb.Output(), "admin connections at admin.max_connections") {
		t.Errorf("the cap was never logged:\n%s", pb.Output())
	}
	if strings.Contains(pb.Output(), "too many open files") {
		t.Errorf("pollbal ran out of descriptors:\n%s", pb.Output())
	}
}

// closedAfter waits for pollbal to close rc without sending anything and returns how long after
// from that was.
func closedAfter(t *testing.T, rc *rawConn, from time.Time) time.Duration {
	t.Helper()
	if err := rc.c.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc.br)
	if err != nil && !closedByPeer(err) {
		t.Fatalf("admin connection not closed by pollbal: %v (read %q)", err, b)
	}
	if len(b) > 0 {
		t.Fatalf("admin connection got %q before the close, want nothing", b)
	}
	return time.Since(from)
}

// Admin connections have timeouts: proxy.header_timeout for a request head (a PUT cut in its head),
// proxy.idle_timeout for a kept-alive connection with no request. A reload applies a new
// idle_timeout and a new admin.max_connections.
func TestEndToEndAdminConnectionTimeoutsAndReload(t *testing.T) {
	pb := startLimitsSetup(t, "{header_timeout: 1s, idle_timeout: 1s}")
	within := func(name string, d, timeout time.Duration) {
		t.Helper()
		t.Logf("%s closed after %s (timeout %s)", name, d.Round(time.Millisecond), timeout)
		if d < timeout || d > timeout+3*time.Second {
			t.Errorf("%s closed after %s, want between %s and %s", name, d, timeout, timeout+3*time.Second)
		}
	}
	// Timed from before the request was sent: a connection is never closed before its timeout.
	start := time.Now()
	half := dialAdminRaw(t, pb, adminHalfHead)
	kept := dialAdminRaw(t, pb, adminGet)
	if !kept.answered(t) {
		t.Fatal("GET /healthz not answered")
	}
	within("PUT cut in its head", closedAfter(t, half, start), time.Second)
	within("kept-alive connection after GET /healthz", closedAfter(t, kept, start), time.Second)

	// A reload: idle_timeout 3s, at most 2 admin connections.
	data, err := os.ReadFile(pb.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "admin: {listen: "+pb.admin+"}", "admin: {listen: "+pb.admin+", max_connections: 2}", 1)
	cfg = strings.Replace(cfg, "proxy: {header_timeout: 1s, idle_timeout: 1s}", "proxy: {header_timeout: 1s, idle_timeout: 3s}", 1)
	if cfg == string(data) || strings.Count(cfg, "max_connections: 2") != 1 || !strings.Contains(cfg, "idle_timeout: 3s") {
		t.Fatalf("the configuration is not the one this test edits:\n%s", data)
	}
	writeInPlace(t, pb.cfgPath, cfg)
	pb.Signal(t, syscall.SIGHUP)
	pb.WaitOutput(t, 10*time.Second, "the reload", "configuration reloaded")

	// Two places: taken by two kept-alive connections (a closing connection of the harness
	// may hold one a moment longer), then the next one is closed at once.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var held []*rawConn
	var heldAt time.Time
	testproc.WaitFor(t, 10*time.Second, "two admin connections held", func() bool {
		sent := time.Now()
		rc := dialAdminRaw(t, pb, adminGet)
		if rc.answered(t) {
			held = append(held, rc)
			heldAt = sent
		}
		return len(held) == 2
	})
	if dialAdminRaw(t, pb, adminGet).answered(t) {
		t.Error("a third admin connection was answered after the reload set admin.max_connections: 2")
	}
	within("kept-alive connection after the reload", closedAfter(t, held[1], heldAt), 3*time.Second)
}
