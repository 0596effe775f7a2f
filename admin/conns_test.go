package admin

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/internal/testproc"
)

func TestTimeoutFor(t *testing.T) {
	l := Limits{MaxConnections: 4, HeaderTimeout: time.Second, IdleTimeout: time.Minute}
	tests := []struct {
		state http.ConnState
		want  time.Duration
	}{
		{http.StateNew, time.Second},  // waiting for the first request head
		{http.StateIdle, time.Minute}, // kept alive between requests
		{http.StateActive, 0},         // a request: bounded by ioTimeout
		{http.StateHijacked, 0},       // not the server's any more
		{http.StateClosed, 0},         // gone
		{http.ConnState(99), 0},       // unknown: no timer rather than a wrong one
	}
	for _, tt := range tests {
		t.Run(tt.state.String(), func(t *testing.T) {
			if got := timeoutFor(tt.state, l); got != tt.want {
				t.Errorf("timeoutFor(%s) = %s, want %s", tt.state, got, tt.want)
			}
		})
	}
}

// serve serves f's admin server on a fresh 127.0.0.1 port through Serve (limits and all) and
// returns its address.
func (f *fixture) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = f.srv.Shutdown(t.Context())
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// adminClient is one raw connection to the admin listener.
type adminClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialAdmin(t *testing.T, addr, sent string) *adminClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if sent != "" {
		if _, err := io.WriteString(c, sent); err != nil {
			t.Fatal(err)
		}
	}
	return &adminClient{c: c, br: bufio.NewReader(c)}
}

const healthz = "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"

// get sends GET /healthz on the connection and fails unless it is answered 200 and kept alive.
func (a *adminClient) get(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(a.c, healthz); err != nil {
		t.Fatal(err)
	}
	if err := a.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(a.br, nil)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v", resp.StatusCode, resp.Close)
	}
}

// closedBy waits (up to 10 s) for the server to close the connection without sending anything
// and returns when that was seen.
func (a *adminClient) closedBy(t *testing.T) time.Time {
	t.Helper()
	if err := a.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(a.br)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("read: %v", err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after 10s")
	}
	if len(b) > 0 {
		t.Fatalf("got %q before the close, want nothing", b)
	}
	return time.Now()
}

// TestAdminConnectionCap: past Limits.MaxConnections a new connection is closed at once,
// without an answer, and counted; a connection that goes frees its place; and a change of the
// cap applies to the next connection.
func TestAdminConnectionCap(t *testing.T) {
	f := newFixture(t, fixtureOptions{limits: Limits{MaxConnections: 2, HeaderTimeout: time.Minute, IdleTimeout: time.Minute}})
	addr := f.serve(t)
	first, second := dialAdmin(t, addr, ""), dialAdmin(t, addr, "")
	first.get(t)
	second.get(t)

	refused := dialAdmin(t, addr, healthz)
	refused.closedBy(t)
	if n := testutil.ToFloat64(f.srv.conns.refused); n != 1 {
		t.Errorf("pollbal_admin_connections_refused_total = %v, want 1", n)
	}
	if got := f.srv.conns.open.Load(); got != 2 {
		t.Errorf("open connections = %d, want 2", got)
	}
	if n := len(f.logs.Records(t, "admin connections at admin.max_connections; closing new ones at once")); n != 1 {
		t.Errorf("%d log lines about the cap, want 1:\n%s", n, f.logs.String())
	}

	_ = first.c.Close()
	testproc.WaitFor(t, 10*time.Second, "the closed connection's place to be free", func() bool { return f.srv.conns.open.Load() == 1 })
	third := dialAdmin(t, addr, "")
	third.get(t)

	// A reload raises the cap: one more fits, then the next is closed again.
	change, err := f.srv.Prepare(f.tokenFile, Limits{MaxConnections: 3, HeaderTimeout: time.Minute, IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Apply(change)
	dialAdmin(t, addr, "").get(t)
	dialAdmin(t, addr, healthz).closedBy(t)
	second.get(t) // the connections held all along are still served
}

// TestAdminConnectionTimeouts: a connection that sends no request head within HeaderTimeout,
// or a half-sent one, is closed; a kept-alive connection is closed once IdleTimeout passed
// without a new request; and a change of the idle timeout applies to connections that go idle
// after it.
func TestAdminConnectionTimeouts(t *testing.T) {
	const header, idle = 200 * time.Millisecond, 400 * time.Millisecond
	f := newFixture(t, fixtureOptions{limits: Limits{MaxConnections: 10, HeaderTimeout: header, IdleTimeout: idle}})
	addr := f.serve(t)
	// Closed no earlier than the timeout, and within a generous bound on a loaded machine.
	within := func(name string, from, to time.Time, timeout time.Duration) {
		t.Helper()
		d := to.Sub(from)
		t.Logf("%s closed after %s (timeout %s)", name, d.Round(time.Millisecond), timeout)
		if d < timeout || d > timeout+5*time.Second {
			t.Errorf("%s closed after %s, want between %s and %s", name, d, timeout, timeout+5*time.Second)
		}
	}

	start := time.Now()
	silent := dialAdmin(t, addr, "")
	within("silent connection", start, silent.closedBy(t), header)
	start = time.Now()
	halfHead := dialAdmin(t, addr, "PUT /admin/backends/web-1/pool HTTP/1.1\r\nHost: admin\r\nContent-Le")
	within("half-sent head", start, halfHead.closedBy(t), header)

	// Timed from before the request is sent: the connection goes idle once it is answered.
	kept := dialAdmin(t, addr, "")
	sent := time.Now()
	kept.get(t)
	within("idle keep-alive", sent, kept.closedBy(t), idle)

	// A request head started on a kept-alive connection and never finished is idle too.
	kept = dialAdmin(t, addr, "")
	sent = time.Now()
	kept.get(t)
	if _, err := io.WriteString(kept.c, "GET /healthz HTTP/1.1\r\nHo"); err != nil {
		t.Fatal(err)
	}
	within("half-sent second request", sent, kept.closedBy(t), idle)

	const longer = 1200 * time.Millisecond
	change, err := f.srv.Prepare(f.tokenFile, Limits{MaxConnections: 10, HeaderTimeout: header, IdleTimeout: longer})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Apply(change)
	kept = dialAdmin(t, addr, "")
	sent = time.Now()
	kept.get(t)
	within("idle keep-alive after the change", sent, kept.closedBy(t), longer)
	testproc.WaitFor(t, 10*time.Second, "every place to be free", func() bool { return f.srv.conns.open.Load() == 0 })
}
