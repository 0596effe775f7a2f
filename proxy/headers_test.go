package proxy

import (
	"bufio"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

func TestHopHeader(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want hopKind
	}{
		{name: "connection canonical", key: "Connection", want: hopConnection},
		{name: "connection lower", key: "connection", want: hopConnection},
		{name: "keep-alive", key: "kEEP-aLIVE", want: hopBoth},
		{name: "te upper", key: "TE", want: hopBoth},
		{name: "te normalized", key: "Te", want: hopBoth},
		{name: "trailer", key: "Trailer", want: hopBoth},
		{name: "transfer-encoding", key: "transfer-encoding", want: hopBoth},
		{name: "upgrade", key: "Upgrade", want: hopUpgrade},
		{name: "upgrade lower", key: "upgrade", want: hopUpgrade},
		{name: "proxy-authenticate", key: "Proxy-Authenticate", want: hopBoth},
		{name: "proxy-authorization", key: "proxy-authorization", want: hopBoth},
		{name: "proxy-connection", key: "Proxy-Connection", want: hopBoth},
		{name: "expect only on requests", key: "Expect", want: hopRequest},
		{name: "end-to-end header", key: "Content-Type", want: hopNone},
		{name: "same length as connection", key: "Connectiox", want: hopNone},
		{name: "authorization is end-to-end", key: "Authorization", want: hopNone},
		{name: "empty", key: "", want: hopNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hopHeader([]byte(tt.key)); got != tt.want {
				t.Errorf("hopHeader(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}

func TestClassifyHeader(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want headerClass
	}{
		{name: "x-forwarded-for", key: "X-Forwarded-For", want: headerClass{fwd: fwdFor}},
		{name: "x-forwarded-host lower", key: "x-forwarded-host", want: headerClass{fwd: fwdHost}},
		{name: "x-forwarded-proto", key: "X-FORWARDED-PROTO", want: headerClass{fwd: fwdProto}},
		{name: "x-real-ip", key: "X-Real-Ip", want: headerClass{fwd: fwdRealIP}},
		{name: "forwarded", key: "forwarded", want: headerClass{fwd: fwdForwarded}},
		{name: "same length as forwarded", key: "X-Real-IQ", want: headerClass{}},
		{name: "hop", key: "Transfer-Encoding", want: headerClass{hop: hopBoth}},
		{name: "same length as transfer-encoding and x-forwarded-proto", key: "X-Forwarded-Protx", want: headerClass{}},
		{name: "longer than every classed name", key: "X-Some-Very-Long-Header-Name", want: headerClass{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyHeader([]byte(tt.key)); got != tt.want {
				t.Errorf("classifyHeader(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
	// Every name of the table is found under its own class, whatever the case.
	for _, h := range classedHeaders {
		for _, key := range []string{h.name, strings.ToLower(h.name), strings.ToUpper(h.name)} {
			if got := classifyHeader([]byte(key)); got != h.class {
				t.Errorf("classifyHeader(%q) = %+v, want %+v", key, got, h.class)
			}
		}
	}
}

func TestNextToken(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []string
	}{
		{name: "empty", value: "", want: nil},
		{name: "one", value: "close", want: []string{"close"}},
		{name: "spaces and empties", value: " a ,\tb,, c ,", want: []string{"a", "b", "", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for v := []byte(tt.value); len(v) > 0; {
				var tok []byte
				tok, v = nextToken(v)
				got = append(got, string(tok))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("tokens of %q = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

// longChain is an X-Forwarded-For value longer than joined's array.
var longChain = strings.TrimSuffix(strings.Repeat("127.0.0.100, ", 40), ", ")

func TestJoined(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{name: "nothing", want: ""},
		{name: "one", values: []string{"a"}, want: "a"},
		{name: "several", values: []string{"a", "b", "c"}, want: "a, b, c"},
		{name: "exactly full", values: []string{strings.Repeat("x", joinedSize-3), "y"}, want: strings.Repeat("x", joinedSize-3) + ", y"},
		{name: "spills past the array", values: []string{strings.Repeat("x", joinedSize-2), "y", "z"}, want: strings.Repeat("x", joinedSize-2) + ", y, z"},
		{name: "first value too long", values: []string{strings.Repeat("x", joinedSize+1), "y"}, want: strings.Repeat("x", joinedSize+1) + ", y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var j joined
			for _, v := range tt.values {
				j.add([]byte(v), ", ")
			}
			if got := string(j.bytes()); got != tt.want {
				t.Errorf("joined %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStripResponseHeaders works on a response header block with normalizing disabled, as
// HostClient reads it from a backend: names keep the backend's case.
func TestStripResponseHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers [][2]string
		want    []string // lower-case names left, sorted
	}{
		{name: "nothing to strip", headers: [][2]string{{"X-A", "1"}, {"Cache-Control", "no-store"}},
			want: []string{"cache-control", "x-a"}},
		{name: "standard names in any case", headers: [][2]string{{"keep-alive", "timeout=5"}, {"Upgrade", "h2c"}, {"PROXY-AUTHENTICATE", "Basic"}, {"X-A", "1"}},
			want: []string{"x-a"}},
		{name: "connection names more", headers: [][2]string{{"Connection", "x-hop, Keep-Alive"}, {"X-Hop", "1"}, {"x-keep", "1"}, {"Keep-Alive", "1"}},
			want: []string{"x-keep"}},
		{name: "connection close only", headers: [][2]string{{"Connection", "close"}, {"X-A", "1"}},
			want: []string{"x-a"}},
		{name: "expect is end-to-end on responses", headers: [][2]string{{"Expect", "x"}},
			want: []string{"expect"}},
		{name: "many connection tokens spill to the heap", headers: manyHops(40),
			want: []string{"x-keep"}},
		{name: "pollbal's own names in any case", headers: [][2]string{{"X-Pollbal-Reason", "pool_exhausted"}, {"x-pollbal-backend", "b9"},
			{"X-POLLBAL-POOL", "p"}, {"X-Pollbal-Anything", "1"}, {"X-A", "1"}},
			want: []string{"x-a"}},
		{name: "names that only look like pollbal's kept", headers: [][2]string{{"X-Pollbal", "1"}, {"X-Pollbalx-A", "1"}, {"X_Pollbal-Reason", "1"}},
			want: []string{"x-pollbal", "x-pollbalx-a", "x_pollbal-reason"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h fasthttp.ResponseHeader
			h.DisableNormalizing()
			h.SetNoDefaultContentType(true)
			for _, kv := range tt.headers {
				h.Add(kv[0], kv[1])
			}
			stripResponseHeaders(&h)
			var got []string
			for k := range h.All() {
				got = append(got, strings.ToLower(string(k)))
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("left %q, want %q", got, tt.want)
			}
			if h.ConnectionClose() {
				t.Error("connection close kept")
			}
		})
	}
}

// manyHops is a block whose Connection header names n headers, more than hopSet's arrays hold.
func manyHops(n int) [][2]string {
	var names []string
	var hs [][2]string
	for i := 0; i < n; i++ {
		name := "X-Hop-Header-Number-" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		names = append(names, name)
		hs = append(hs, [2]string{name, "1"})
	}
	return append(append(hs, [2]string{"Connection", strings.Join(names, ", ")}), [2]string{"X-Keep", "1"})
}

// TestRequestHeaders checks what a backend receives: hop-by-hop headers gone, client-identity
// headers replaced (from an untrusted client) or kept (from a trusted proxy), everything else
// as the client sent it.
func TestRequestHeaders(t *testing.T) {
	seen := make(chan map[string]string, 1)
	rec := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		m := map[string]string{"protocol": string(ctx.Request.Header.Protocol())}
		for k, v := range ctx.Request.Header.All() {
			name := strings.ToLower(string(k))
			if prev, dup := m[name]; dup { // make repeated lines visible
				m[name] = prev + " | " + string(v)
				continue
			}
			m[name] = string(v)
		}
		seen <- m
	})
	untrusted := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*.shop.test"}}}, []configs.Backend{{ID: "b1", Address: rec.addr}}, tieBreakID)
	untrusted.Proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.2/32")}
	trusted := *untrusted
	trusted.Proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	e := newEnv(t, untrusted, "b1")
	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	const spoofed = "X-Forwarded-For: 127.0.0.9\r\nX-Real-IP: 9.9.9.9\r\nForwarded: for=8.8.8.8\r\n" +
		"X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil\r\n"
	tests := []struct {
		name    string
		trusted bool // the client, 127.0.0.1, is in proxy.trusted_proxies
		request string
		want    map[string]string // "" = must be absent
	}{
		{name: "client-identity headers added",
			request: "GET /p HTTP/1.1\r\nHost: www.shop.test:8080\r\nX-End: 1\r\n\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "x-forwarded-host": "www.shop.test:8080",
				"x-forwarded-proto": "http", "forwarded": "", "host": "www.shop.test:8080", "x-end": "1", "connection": "", "protocol": "HTTP/1.1"}},
		{name: "untrusted client's identity headers replaced",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\n" + spoofed + "\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "forwarded": "",
				"x-forwarded-proto": "http", "x-forwarded-host": "a.shop.test"}},
		{name: "untrusted client's repeated lines in any case replaced by one",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX-Forwarded-For: 127.0.0.7\r\nx-forwarded-host: h1\r\nx-real-ip: 1.1.1.1\r\n" +
				"X-Forwarded-For: 127.0.0.8, 127.0.0.9\r\nX-Forwarded-Host: h2\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Proto: ws\r\n" +
				"X-REAL-IP: 2.2.2.2\r\nforwarded: for=1.1.1.1\r\nFORWARDED: for=2.2.2.2\r\n\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "forwarded": "",
				"x-forwarded-host": "a.shop.test", "x-forwarded-proto": "http"}},
		{name: "untrusted client's long X-Forwarded-For chain dropped",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX-Forwarded-For: " + longChain + "\r\n\r\n",
			want:    map[string]string{"x-forwarded-for": "127.0.0.1"}},
		{name: "untrusted client's Connection cannot remove pollbal's headers",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nConnection: X-Forwarded-For, X-Real-IP\r\n" + spoofed + "\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "forwarded": "",
				"x-forwarded-proto": "http", "x-forwarded-host": "a.shop.test"}},
		{name: "trusted proxy's X-Forwarded-For appended to, the others kept",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\n" + spoofed + "\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.9, 127.0.0.1", "x-real-ip": "9.9.9.9", "forwarded": "for=8.8.8.8",
				"x-forwarded-proto": "https", "x-forwarded-host": "evil"}},
		{name: "trusted proxy's X-Forwarded-For lines joined in order, other repeated lines kept",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX-Forwarded-For: 127.0.0.7\r\nx-forwarded-host: h1\r\n" +
				"X-Forwarded-For: 127.0.0.8, 127.0.0.9\r\nX-Forwarded-Host: h2\r\nX-Forwarded-Proto: https\r\n\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.7, 127.0.0.8, 127.0.0.9, 127.0.0.1",
				"x-forwarded-host": "h1 | h2", "x-forwarded-proto": "https", "x-real-ip": "127.0.0.1"}},
		{name: "trusted proxy's long X-Forwarded-For chain",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX-Forwarded-For: " + longChain + "\r\n\r\n",
			want:    map[string]string{"x-forwarded-for": longChain + ", 127.0.0.1"}},
		{name: "trusted proxy that sent none gets them set",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\n\r\n",
			want: map[string]string{"x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "forwarded": "",
				"x-forwarded-proto": "http", "x-forwarded-host": "a.shop.test"}},
		{name: "trusted proxy's Connection naming X-Real-IP: pollbal's replaces it",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nConnection: x-real-ip\r\n" + spoofed + "\r\n",
			want:    map[string]string{"x-real-ip": "127.0.0.1", "x-forwarded-proto": "https", "forwarded": "for=8.8.8.8"}},
		{name: "standard hop-by-hop headers stripped",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\n" +
				"Proxy-Connection: keep-alive\r\nTE: trailers\r\nUpgrade: websocket\r\nAuthorization: Bearer t\r\n\r\n",
			want: map[string]string{"keep-alive": "", "proxy-authorization": "", "proxy-connection": "", "te": "",
				"upgrade": "", "authorization": "Bearer t"}},
		{name: "headers named by Connection stripped, lower case too",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nconnection: x-hop, Keep-Alive\r\nx-hop: 1\r\nkeep-alive: 1\r\nX-Keep: 1\r\n\r\n",
			want:    map[string]string{"connection": "", "x-hop": "", "keep-alive": "", "x-keep": "1"}},
		{name: "client's Connection: close stays between client and pollbal",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nConnection: close\r\n\r\n",
			want:    map[string]string{"connection": ""}},
		{name: "HTTP/1.0 client, HTTP/1.1 backend connection",
			request: "GET / HTTP/1.0\r\nHost: a.shop.test\r\n\r\n",
			want:    map[string]string{"connection": "", "protocol": "HTTP/1.1"}},
		{name: "names with underscores dropped, whatever they look like",
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real_IP: 6.6.6.6\r\n" +
				"X_Forwarded_Proto: https\r\nx_custom: 1\r\nX-Custom: 2\r\n\r\n",
			want: map[string]string{"x_forwarded_for": "", "x-real_ip": "", "x_forwarded_proto": "", "x_custom": "",
				"x-custom": "2", "x-forwarded-for": "127.0.0.1", "x-real-ip": "127.0.0.1", "x-forwarded-proto": "http"}},
		{name: "names with underscores dropped from a trusted proxy too",
			trusted: true,
			request: "GET / HTTP/1.1\r\nHost: a.shop.test\r\nX_Forwarded_For: 6.6.6.6\r\nX-Forwarded-For: 10.1.1.1\r\n\r\n",
			want:    map[string]string{"x_forwarded_for": "", "x-forwarded-for": "10.1.1.1, 127.0.0.1"}},
		{name: "chunked body forwarded with a length",
			request: "POST / HTTP/1.1\r\nHost: a.shop.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			want:    map[string]string{"transfer-encoding": "", "content-length": "5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := untrusted
			if tt.trusted {
				cfg = &trusted
			}
			e.bal.Update(cfg)
			r := dialRaw(t, e.ln, client).exchange(tt.request)
			if r.code != 200 {
				t.Fatalf("got %v", r)
			}
			got := <-seen
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("backend saw %s = %q, want %q (all: %v)", k, got[k], want, got)
				}
			}
		})
	}
}

// TestResponseHeaders checks what a client receives from a backend's response.
func TestResponseHeaders(t *testing.T) {
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		h := &ctx.Response.Header
		switch string(ctx.Path()) {
		case "/hops":
			h.Set("keep-alive", "timeout=5")
			h.Set("Proxy-Authenticate", "Basic")
			h.Set("Upgrade", "h2c")
			h.Set("Connection", "X-Resp-Hop")
			h.Set("X-Resp-Hop", "1")
			h.Set("X-Resp-Keep", "1")
			ctx.SetBodyString("hops")
		case "/close":
			ctx.SetConnectionClose()
			ctx.SetBodyString("close")
		case "/chunked":
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				for i := 0; i < 3; i++ {
					_, _ = w.WriteString("part ")
					_ = w.Flush()
				}
			})
		case "/spoof":
			h.Set("X-Pollbal-Backend", "someone-else")
			h.Set("X-Pollbal-Pool", "pool-other")
			h.Set("X-Pollbal-Reason", "pool_exhausted")
			ctx.SetBodyString("spoof")
		case "/spoof-lower":
			h.Set("x-pollbal-backend", "someone-else")
			h.Set("x-pollbal-reason", "backend_timeout")
			h.Set("X-POLLBAL-TRACE", "1")
			ctx.SetBodyString("spoof")
		}
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	rc := dialRaw(t, e.ln, nil) // one client connection for every case: none may close it
	tests := []struct {
		name     string
		path     string
		wantBody string
		want     map[string]string // "" = must be absent
	}{
		{name: "hop-by-hop stripped, end-to-end kept", path: "/hops", wantBody: "hops",
			want: map[string]string{"keep-alive": "", "proxy-authenticate": "", "upgrade": "", "x-resp-hop": "",
				"x-resp-keep": "1", "connection": ""}},
		{name: "backend's Connection: close does not close the client connection", path: "/close", wantBody: "close",
			want: map[string]string{"connection": ""}},
		{name: "chunked response streamed chunked", path: "/chunked", wantBody: "part part part ",
			want: map[string]string{"transfer-encoding": "chunked", "content-length": ""}},
		{name: "backend cannot spoof pollbal's headers", path: "/spoof", wantBody: "spoof",
			want: map[string]string{"x-pollbal-backend": "b1", "x-pollbal-pool": "default", "x-pollbal-reason": ""}},
		{name: "nor in lower case, nor invent one", path: "/spoof-lower", wantBody: "spoof",
			want: map[string]string{"x-pollbal-backend": "b1", "x-pollbal-pool": "default", "x-pollbal-reason": "", "x-pollbal-trace": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rc.exchange("GET " + tt.path + " HTTP/1.1\r\nHost: shop.test\r\n\r\n")
			if r.code != 200 || r.body != tt.wantBody {
				t.Fatalf("got %v, want 200 %q", r, tt.wantBody)
			}
			if r.headers["x-pollbal-backend"] != "b1" || r.headers["x-pollbal-pool"] != "default" {
				t.Errorf("pollbal headers missing: %v", r.headers)
			}
			for k, want := range tt.want {
				if r.headers[k] != want {
					t.Errorf("client saw %s = %q, want %q (all: %v)", k, r.headers[k], want, r.headers)
				}
			}
		})
	}
}
