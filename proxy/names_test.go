package proxy

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// TestRequestName: a token name is forwarded, one holding "_" is dropped, and anything else
// (empty, a space, a control byte, a separator, a byte past ASCII) is refused.
func TestRequestName(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want nameKind
	}{
		{name: "plain", key: "Accept", want: nameForwarded},
		{name: "every token punctuation", key: "X-!#$%&'*+-.^`|~09az", want: nameForwarded},
		{name: "one letter", key: "a", want: nameForwarded},
		{name: "underscore inside", key: "X_Forwarded_For", want: nameUnderscore},
		{name: "underscore mixed with dashes", key: "X-Real_IP", want: nameUnderscore},
		{name: "underscore alone", key: "_", want: nameUnderscore},
		{name: "empty", key: "", want: nameInvalid},
		{name: "inner space", key: "Foo Bar", want: nameInvalid},
		{name: "trailing space", key: "Host ", want: nameInvalid},
		{name: "tab", key: "X\tA", want: nameInvalid},
		{name: "NUL", key: "X\x00A", want: nameInvalid},
		{name: "DEL", key: "X\x7fA", want: nameInvalid},
		{name: "byte past ASCII", key: "X-\xc3\xa9", want: nameInvalid},
		{name: "colon", key: "X:A", want: nameInvalid},
		{name: "separator", key: "X(A)", want: nameInvalid},
		{name: "slash", key: "X/A", want: nameInvalid},
		{name: "quote", key: "X\"A", want: nameInvalid},
		{name: "underscore and a space: refused, not dropped", key: "X_A B", want: nameInvalid},
		{name: "long token", key: strings.Repeat("x-", 200), want: nameForwarded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := requestName([]byte(tt.key)); got != tt.want {
				t.Errorf("requestName(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}

// TestRequestNameEveryByte holds the table to RFC 9110's token characters, byte by byte.
func TestRequestNameEveryByte(t *testing.T) {
	const tchar = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for c := 0; c < 256; c++ {
		want := nameInvalid
		switch {
		case c == '_':
			want = nameUnderscore
		case strings.IndexByte(tchar, byte(c)) >= 0:
			want = nameForwarded
		}
		if got := requestName([]byte{'X', byte(c)}); got != want {
			t.Errorf("requestName(\"X\\x%02x\") = %d, want %d", c, got, want)
		}
	}
}

// TestHasUserinfo: userinfo in Host or in a target's authority is found, and an "@" elsewhere
// in a target (its path or query) is not mistaken for it.
func TestHasUserinfo(t *testing.T) {
	tests := []struct {
		name         string
		host, target string
		want         bool
	}{
		{name: "plain", host: "www.test", target: "/", want: false},
		{name: "user in Host", host: "user@www.test", target: "/", want: true},
		{name: "user and password in Host", host: "user:pw@www.test:8080", target: "/", want: true},
		{name: "empty userinfo in Host", host: "@www.test", target: "/", want: true},
		{name: "absolute target with userinfo", host: "www.test", target: "http://user:pw@www.test/", want: true},
		{name: "absolute target with empty userinfo", host: "www.test", target: "http://@www.test/x", want: true},
		{name: "absolute target without", host: "www.test", target: "http://www.test/a@b?c=d@e", want: false},
		{name: "at sign in the query of an absolute target", host: "www.test", target: "http://www.test?x=a@b", want: false},
		{name: "at sign after a fragment mark", host: "www.test", target: "http://www.test#a@b", want: false},
		{name: "network-path target", host: "www.test", target: "//user@evil.test/", want: true},
		{name: "at sign in the path", host: "www.test", target: "/users/@me", want: false},
		{name: "URL with userinfo in the query", host: "www.test", target: "/go?to=http://user@evil.test/", want: false},
		{name: "asterisk", host: "www.test", target: "*", want: false},
		{name: "authority form", host: "www.test:443", target: "www.test:443", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req fasthttp.Request
			req.Header.SetHost(tt.host)
			req.Header.SetRequestURI(tt.target)
			if got := hasUserinfo([]byte(tt.host), []byte(tt.target), req.URI()); got != tt.want {
				t.Errorf("hasUserinfo(%q, %q) = %v, want %v", tt.host, tt.target, got, tt.want)
			}
		})
	}
}

// TestRefusedHeaderNamesAndUserinfo: a header name that is not a token, and userinfo in the
// target or in Host, are answered 400 bad_request by pollbal, reach no backend, and close the
// connection; a name holding "_" is dropped and the request forwarded.
func TestRefusedHeaderNamesAndUserinfo(t *testing.T) {
	seen := make(chan map[string]string, 1)
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		m := map[string]string{}
		for k, v := range ctx.Request.Header.All() {
			m[strings.ToLower(string(k))] = string(v)
		}
		seen <- m
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"www.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	for _, tt := range []struct {
		name    string
		request string
	}{
		{name: "space inside a name", request: "GET / HTTP/1.1\r\nHost: www.test\r\nFoo Bar: x\r\n\r\n"},
		{name: "space inside a name, with a body", request: "POST / HTTP/1.1\r\nHost: www.test\r\nX Y: 1\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "user in Host", request: "GET / HTTP/1.1\r\nHost: user@www.test\r\n\r\n"},
		{name: "user and password in the target", request: "GET http://user:pw@www.test/ HTTP/1.1\r\nHost: www.test\r\n\r\n"},
		{name: "user in the target, no Host", request: "GET http://user@www.test/ HTTP/1.0\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := be.hits.Load()
			rc := dialRaw(t, e.ln, nil)
			r := rc.exchange(tt.request)
			if r.code != 400 || r.headers["x-pollbal-reason"] != "bad_request" || r.headers["connection"] != "close" {
				t.Errorf("got %v, want 400 bad_request, then close", r)
			}
			if n := be.hits.Load() - before; n != 0 {
				t.Errorf("the backend got %d requests, want 0", n)
			}
		})
	}

	client := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	r := dialRaw(t, e.ln, client).exchange("GET / HTTP/1.1\r\nHost: www.test\r\nX_Forwarded_For: 6.6.6.6\r\nX-Real_IP: 6.6.6.6\r\n" +
		"x_forwarded_proto: https\r\nX-Keep: 1\r\n\r\n")
	if r.code != 200 {
		t.Fatalf("underscore names: got %v, want the backend's 200", r)
	}
	got := <-seen
	for k := range got {
		if strings.Contains(k, "_") {
			t.Errorf("the backend saw %s: %q", k, got[k])
		}
	}
	if got["x-keep"] != "1" || got["x-forwarded-for"] != "127.0.0.1" || got["x-real-ip"] != "127.0.0.1" || got["x-forwarded-proto"] != "http" {
		t.Errorf("the backend saw %v, want X-Keep and pollbal's own client-identity headers", got)
	}
}

// TestTrailersDropped: the fields of a chunked request body's trailer section never reach the
// backend, neither as header fields (fasthttp would turn them into some when the body is
// forwarded whole with a Content-Length) nor as trailer fields after a streamed body, whatever
// their names: a "Forwarded" trailer would otherwise pass for the client identity, and names
// with "_" or a space would escape the header-name rules.
func TestTrailersDropped(t *testing.T) {
	type seen struct{ headers, trailers string }
	got := make(chan seen, 1)
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		_ = ctx.Request.Body()
		var s seen
		for k, v := range ctx.Request.Header.All() {
			s.headers += string(k) + ": " + string(v) + "\n"
		}
		s.trailers = string(ctx.Request.Header.TrailerHeader())
		got <- s
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"www.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	const trailers = "Forwarded: for=6.6.6.6\r\nX_Bad: 1\r\nBad Name: 1\r\nX-Custom: 1\r\n"
	for _, tt := range []struct {
		name     string
		size     int
		announce string // a Trailer header
	}{
		{name: "body forwarded whole", size: 5},
		{name: "body forwarded whole, trailers announced", size: 5, announce: "Trailer: Forwarded, X-Custom\r\n"},
		{name: "body streamed", size: 100 << 10},
		{name: "body streamed, trailers announced", size: 100 << 10, announce: "Trailer: Forwarded, X-Custom\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := "POST / HTTP/1.1\r\nHost: www.test\r\nTransfer-Encoding: chunked\r\n" + tt.announce + "\r\n" +
				strconv.FormatInt(int64(tt.size), 16) + "\r\n" + strings.Repeat("a", tt.size) + "\r\n0\r\n" + trailers + "\r\n"
			if r := rawExchange(t, e.ln, req); r.code != 200 {
				t.Fatalf("got %v, want the backend's 200", r)
			}
			s := <-got
			for _, name := range []string{"forwarded", "x_bad", "bad name", "x-custom", "trailer"} {
				if strings.Contains(strings.ToLower(s.headers), name+":") || strings.Contains(strings.ToLower(s.trailers), name+":") {
					t.Errorf("%s reached the backend: headers\n%strailers %q", name, s.headers, s.trailers)
				}
			}
		})
	}
}
