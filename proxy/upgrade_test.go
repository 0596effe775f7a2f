package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

func TestPlanUpgrade(t *testing.T) {
	tests := []struct {
		name       string
		http11     bool
		method     string
		connection string
		upgrade    string
		body       bool
		want       upgradePlan
	}{
		{name: "plain request", http11: true, method: "GET", want: upgradeNone},
		{name: "keep-alive only", http11: true, method: "GET", connection: "keep-alive", want: upgradeNone},
		{name: "websocket", http11: true, method: "GET", connection: "Upgrade", upgrade: "websocket", want: upgradeWebSocket},
		{name: "websocket, any case, in a list", http11: true, method: "GET", connection: "keep-alive, UPGRADE", upgrade: " WebSocket ", want: upgradeWebSocket},
		{name: "Upgrade without Connection naming it is dropped, not an upgrade", http11: true, method: "GET", connection: "keep-alive", upgrade: "websocket", want: upgradeNone},
		{name: "Connection: upgrade without Upgrade", http11: true, method: "GET", connection: "upgrade", want: upgradeNone},
		{name: "empty Upgrade value", http11: true, method: "GET", connection: "upgrade", upgrade: " , ", want: upgradeNone},
		{name: "HTTP/1.0 ignores Upgrade", http11: false, method: "GET", connection: "upgrade", upgrade: "websocket", want: upgradeNone},
		{name: "h2c refused", http11: true, method: "GET", connection: "Upgrade, HTTP2-Settings", upgrade: "h2c", want: upgradeRefused},
		{name: "TLS upgrade refused", http11: true, method: "OPTIONS", connection: "upgrade", upgrade: "TLS/1.2", want: upgradeRefused},
		{name: "a choice including websocket refused", http11: true, method: "GET", connection: "upgrade", upgrade: "h2c, websocket", want: upgradeRefused},
		{name: "websocket twice: two offers, refused", http11: true, method: "GET", connection: "upgrade", upgrade: "websocket, websocket", want: upgradeRefused},
		{name: "websocket with a version refused", http11: true, method: "GET", connection: "upgrade", upgrade: "websocket/13", want: upgradeRefused},
		{name: "websocket by POST refused", http11: true, method: "POST", connection: "upgrade", upgrade: "websocket", want: upgradeRefused},
		{name: "websocket with a body refused", http11: true, method: "GET", connection: "upgrade", upgrade: "websocket", body: true, want: upgradeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planUpgrade(tt.http11, []byte(tt.method), []byte(tt.connection), []byte(tt.upgrade), tt.body)
			if got != tt.want {
				t.Errorf("planUpgrade = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPrepareRequestUpgrade checks what reaches the backend: a WebSocket handshake keeps its
// Connection and Upgrade (and only those hop-by-hop headers), anything else loses them.
func TestPrepareRequestUpgrade(t *testing.T) {
	tests := []struct {
		name           string
		headers        []string
		contentLength  int
		want           upgradePlan
		wantConnection string
		wantUpgrade    string
	}{
		{name: "websocket", headers: []string{"Connection", "keep-alive, Upgrade", "Upgrade", "websocket", "Keep-Alive", "timeout=5", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
			want: upgradeWebSocket, wantConnection: "Upgrade", wantUpgrade: "websocket"},
		{name: "Upgrade on two lines is two protocols", headers: []string{"Connection", "Upgrade", "Upgrade", "websocket", "Upgrade", "h2c"},
			want: upgradeRefused},
		{name: "h2c", headers: []string{"Connection", "Upgrade, HTTP2-Settings", "Upgrade", "h2c", "HTTP2-Settings", "AAMAAABkAAQCAAAAAAIAAAAA"},
			want: upgradeRefused},
		{name: "Upgrade not named by Connection", headers: []string{"Upgrade", "websocket"}, want: upgradeNone},
		{name: "websocket with a body", headers: []string{"Connection", "Upgrade", "Upgrade", "websocket"}, contentLength: 5, want: upgradeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("GET")
			ctx.Request.Header.SetHost("shop.test")
			for i := 0; i+1 < len(tt.headers); i += 2 {
				ctx.Request.Header.Add(tt.headers[i], tt.headers[i+1])
			}
			if tt.contentLength > 0 {
				ctx.Request.SetBodyString("hello"[:tt.contentLength])
				ctx.Request.Header.SetContentLength(tt.contentLength) // as a parsed request has it
			}
			got, ok := prepareRequest(&ctx, &trustedNets{})
			if !ok || got != tt.want {
				t.Fatalf("prepareRequest = %d, %v; want %d, true", got, ok, tt.want)
			}
			h := &ctx.Request.Header
			if got := string(h.Peek("Connection")); got != tt.wantConnection {
				t.Errorf("Connection %q, want %q", got, tt.wantConnection)
			}
			if got := string(h.Peek("Upgrade")); got != tt.wantUpgrade {
				t.Errorf("Upgrade %q, want %q", got, tt.wantUpgrade)
			}
			if h.Peek("Keep-Alive") != nil {
				t.Errorf("Keep-Alive %q kept", h.Peek("Keep-Alive"))
			}
			if tt.want == upgradeWebSocket && string(h.Peek("Sec-WebSocket-Key")) == "" {
				t.Error("Sec-WebSocket-Key dropped")
			}
		})
	}
}

// wsBackendAddr returns a 127.0.0.1 address whose server answers each connection's request
// 101 and then echoes every byte back until the connection closes.
func wsBackendAddr(t *testing.T) string {
	t.Helper()
	return testproc.ServeLocal(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Echo: yes\r\n\r\nfirst"))
		_, _ = io.Copy(c, br)
	})
}

const wsHandshake = "GET /ws HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"

// upgradeEnv is a proxy in front of wsBackendAddr's echo.
func upgradeEnv(t *testing.T, tune func(*configs.Proxy)) (*env, *balancer.Backend) {
	t.Helper()
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: wsBackendAddr(t)}}, tieBreakID)
	tune(&cfg.Proxy)
	e := newEnv(t, cfg, "b1")
	return e, backendOf(t, e.bal, "b1")
}

// upgrade opens an upgraded connection through the proxy and checks the 101 and the bytes
// the backend sent right after it.
func upgrade(t *testing.T, e *env) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := e.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte(wsHandshake)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" || resp.Header.Get("Connection") != "Upgrade" ||
		resp.Header.Get("X-Echo") != "yes" || resp.Header.Get(headerBackend) != "b1" {
		t.Fatalf("answer %d %v, want the backend's 101", resp.StatusCode, resp.Header)
	}
	first := make([]byte, len("first"))
	if _, err := io.ReadFull(br, first); err != nil || string(first) != "first" {
		t.Fatalf("read %q, %v; want the bytes that followed the 101", first, err)
	}
	return c, br
}

func TestUpgradeEchoesAndHoldsLease(t *testing.T) {
	e, b := upgradeEnv(t, func(*configs.Proxy) {})
	c, br := upgrade(t, e)
	for _, msg := range []string{"hello", strings.Repeat("x", 100<<10)} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %v", len(msg), err)
		}
	}
	if n := b.InFlight(); n != 1 {
		t.Errorf("in flight %d while upgraded, want 1", n)
	}
	if n := e.p.upgrades.len(); n != 1 {
		t.Errorf("%d upgraded connections, want 1", n)
	}
	_ = c.Close()
	testproc.WaitFor(t, 10*time.Second, "lease released after the client closed", func() bool { return b.InFlight() == 0 && e.p.upgrades.len() == 0 })
}

func TestUpgradeIdleTimeout(t *testing.T) {
	// Long enough that a loaded machine does not stall the traffic below for a whole timeout.
	const idle = 500 * time.Millisecond
	e, b := upgradeEnv(t, func(p *configs.Proxy) { p.UpgradeIdleTimeout = idle })
	c, br := upgrade(t, e)
	// Traffic keeps it open past the timeout.
	start := time.Now()
	var last time.Time // the last traffic's start: the proxy's idle clock restarts later
	for {
		last = time.Now()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("closed while in use, %v after it opened: %v", time.Since(start), err)
		}
		if time.Since(start) >= 2*idle {
			break
		}
		<-time.After(idle / 20) // the traffic pattern under test, not a wait for an event
	}
	waitClosed(t, c, br)
	if took := time.Since(last); took < idle || took > idle+time.Second {
		t.Errorf("idle connection closed %v after its last traffic, want about %v", took, idle)
	}
	testproc.WaitFor(t, 10*time.Second, "lease released after the idle timeout", func() bool { return b.InFlight() == 0 })
}

func TestShutdownClosesUpgradedAfterTimeout(t *testing.T) {
	e, b := upgradeEnv(t, func(*configs.Proxy) {})
	c, br := upgrade(t, e)
	const wait = 300 * time.Millisecond
	start := time.Now() // before the context: its deadline runs from its creation
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := e.p.Shutdown(ctx)
	took := time.Since(start)
	if err == nil {
		t.Error("Shutdown reported a complete drain with an upgraded connection cut")
	}
	if took < wait || took > wait+time.Second {
		t.Errorf("Shutdown took %v, want about %v", took, wait)
	}
	if _, rest := waitClosed(t, c, br); rest != "" {
		t.Errorf("read %q after shutdown", rest)
	}
	if n := b.InFlight(); n != 0 {
		t.Errorf("in flight %d after shutdown, want 0", n)
	}
}

func TestUpgradeRefused(t *testing.T) {
	e, _ := upgradeEnv(t, func(*configs.Proxy) {})
	r := rawExchange(t, e.ln, "GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
	if r.code != 501 || r.headers["x-pollbal-reason"] != reasonUpgradeUnsupported {
		t.Errorf("h2c upgrade: %v, want 501 %s", r, reasonUpgradeUnsupported)
	}
}

// TestUpgradeAbandoned covers a client connection that is closed after the backend's 101 but
// before fasthttp hands it over: the session ends there (lease released, backend connection
// closed), and the hand-over that may still come finds nothing to do.
func TestUpgradeAbandoned(t *testing.T) {
	e, b := upgradeEnv(t, func(*configs.Proxy) {})
	snap := e.bal.Snapshot()
	lease, err := e.bal.Acquire(snap, snap.Route([]byte("shop.test")), &balancer.Tried{})
	if err != nil {
		t.Fatal(err)
	}
	bc, err := e.p.upstreams.Get(snap, lease.Backend).Get(true)
	if err != nil {
		t.Fatal(err)
	}
	cc, dialed := acceptClient(t, e.p)
	s := &upgradeSession{p: e.p, bc: bc, lease: lease, head: []byte("HTTP/1.1 101 Switching Protocols\r\n\r\n"), cc: cc}
	cc.SetHandoff(s)
	e.p.upgrades.add(s)
	if b.InFlight() != 1 || e.p.upgrades.len() != 1 {
		t.Fatalf("before: in flight %d, %d sessions; want 1 and 1", b.InFlight(), e.p.upgrades.len())
	}

	_ = cc.Close()
	if b.InFlight() != 0 || e.p.upgrades.len() != 0 {
		t.Errorf("after the close: in flight %d, %d sessions; want 0 and 0", b.InFlight(), e.p.upgrades.len())
	}
	s.serve(cc) // a late hand-over
	_ = dialed.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(dialed); err != nil || len(got) != 0 {
		t.Errorf("the client read %q, %v; want the connection closed with nothing written", got, err)
	}
	if b.InFlight() != 0 {
		t.Errorf("in flight %d after the late hand-over, want 0 (released once)", b.InFlight())
	}
}
