package main

// End-to-end: WebSocket connections through the real binary to the example backend's /ws echo,
// with a real client library: messages echo, the connection holds its backend's slot while
// open, an idle one is closed after proxy.upgrade_idle_timeout, other upgrades get 501, and a
// shutdown closes open ones after shutdown_timeout.

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"pollbal/internal/testproc"
)

// dialWS opens a WebSocket to the example backend's echo through pollbal.
func dialWS(t *testing.T, ctx context.Context, s *streamSetup) (*websocket.Conn, *http.Response) {
	t.Helper()
	c, resp, err := websocket.Dial(ctx, "ws://"+s.pb.listen+"/ws", nil)
	if err != nil {
		t.Fatalf("dial through pollbal: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c, resp
}

// echo sends msg and checks that it comes back.
func echo(t *testing.T, ctx context.Context, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	typ, got, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageText || string(got) != msg {
		t.Fatalf("echo of %d bytes: %v %d bytes, %v", len(msg), typ, len(got), err)
	}
}

// TestWebSocketEchoHoldsLease: messages echo through pollbal; the backend's in_flight in
// /api/state is 1 while the socket is open and 0 once it is closed; the socket counts as a
// client connection meanwhile.
func TestWebSocketEchoHoldsLease(t *testing.T) {
	s := startStreamSetup(t, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp := dialWS(t, ctx, s)
	if got := resp.Header.Get("X-Pollbal-Backend"); got != "web-1" {
		t.Errorf("X-Pollbal-Backend %q on the 101, want web-1", got)
	}
	c.SetReadLimit(1 << 20)
	for _, msg := range []string{"hello", strings.Repeat("0123456789", 20000), "bye"} {
		echo(t, ctx, c, msg)
	}
	if n := s.inFlight(t); n != 1 {
		t.Errorf("in_flight %d while the socket is open, want 1", n)
	}
	m := s.pb.metrics(t)
	if !strings.Contains(m, "\npollbal_upgraded_connections 1\n") {
		t.Errorf("metrics do not show one upgraded connection:\n%s", grepLines(m, "upgraded"))
	}
	// The socket is the only connection on the client listener, and still counts as one.
	if !strings.Contains(m, "\npollbal_client_connections 1\n") {
		t.Errorf("metrics do not count the socket as a client connection:\n%s", grepLines(m, "client_connections"))
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatalf("close handshake through pollbal: %v", err)
	}
	testproc.WaitFor(t, 5*time.Second, "in_flight 0 after the close", func() bool { return s.inFlight(t) == 0 })
	testproc.WaitFor(t, 5*time.Second, "no upgraded or client connection in the metrics", func() bool {
		m := s.pb.metrics(t)
		return strings.Contains(m, "\npollbal_upgraded_connections 0\n") && strings.Contains(m, "\npollbal_client_connections 0\n")
	})
}

// TestWebSocketIdleTimeout: a socket without traffic for upgrade_idle_timeout is closed by
// pollbal, and its slot is released.
func TestWebSocketIdleTimeout(t *testing.T) {
	const idle = 700 * time.Millisecond
	s := startStreamSetup(t, "{upgrade_idle_timeout: 700ms}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := dialWS(t, ctx, s)
	// The echo's start: pollbal's idle clock restarts when the answer passes through it, after
	// this and before echo returns (timed from echo's return, the close came 699.9 ms later).
	last := time.Now()
	echo(t, ctx, c, "ping")
	_, _, err := c.Read(ctx) // nothing comes: pollbal closes the connection
	took := time.Since(last)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("read ended with %v (context %v), want the connection closed by pollbal", err, ctx.Err())
	}
	if took < idle || took > idle+3*time.Second {
		t.Errorf("closed %v after the last traffic, want about %v", took, idle)
	}
	testproc.WaitFor(t, 5*time.Second, "in_flight 0 after the idle timeout", func() bool { return s.inFlight(t) == 0 })
	if m := s.pb.metrics(t); !strings.Contains(m, `pollbal_client_timeouts_total{kind="upgrade_idle"} 1`) {
		t.Errorf("upgrade_idle timeout not counted:\n%s", grepLines(m, "client_timeouts"))
	}
}

// TestWebSocketOtherUpgradeRefused: an h2c upgrade is answered 501 upgrade_unsupported by
// pollbal itself; the request (to a path the backend counts) never reaches the backend.
func TestWebSocketOtherUpgradeRefused(t *testing.T) {
	s := startStreamSetup(t, "{}")
	c, err := net.Dial("tcp4", s.pb.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: www.test\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 501 || resp.Header.Get("X-Pollbal-Reason") != "upgrade_unsupported" {
		t.Errorf("h2c upgrade answered %d %q, want 501 upgrade_unsupported", resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"))
	}
	if n := s.be.stats(t).Requests; n != 0 {
		t.Errorf("the backend saw %d requests, want none", n)
	}
}

// TestWebSocketShutdown: on SIGTERM an open socket keeps working until shutdown_timeout, then
// pollbal closes it and exits 0 within that time.
func TestWebSocketShutdown(t *testing.T) {
	const drain = 2 * time.Second
	s := startStreamSetup(t, "{shutdown_timeout: 2s}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := dialWS(t, ctx, s)
	echo(t, ctx, c, "before")
	start := time.Now()
	s.pb.Signal(t, syscall.SIGTERM)
	echo(t, ctx, c, "during the drain")
	_, _, err := c.Read(ctx)
	closed := time.Since(start)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("read ended with %v (context %v), want the connection closed by the shutdown", err, ctx.Err())
	}
	code := s.pb.ExitCode(t, drain+5*time.Second)
	exited := time.Since(start)
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if closed < drain-100*time.Millisecond || exited > drain+2*time.Second {
		t.Errorf("socket closed %v and pollbal exited %v after SIGTERM; want both about shutdown_timeout (%v)", closed, exited, drain)
	}
}

// grepLines returns the lines of s that contain sub, for failure messages.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
