package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
)

// TestRefusedMethod: CONNECT and TRACE, whatever their case, are the methods pollbal refuses.
func TestRefusedMethod(t *testing.T) {
	tests := []struct {
		name   string
		method string
		want   bool
	}{
		{name: "CONNECT", method: "CONNECT", want: true},
		{name: "lower-case connect", method: "connect", want: true},
		{name: "TRACE", method: "TRACE", want: true},
		{name: "mixed-case trace", method: "Trace", want: true},
		{name: "TRACE prefix", method: "TRACEX"},
		{name: "GET", method: "GET"},
		{name: "OPTIONS", method: "OPTIONS"},
		{name: "unknown method", method: "PROPFIND"},
		{name: "CONNECT prefix", method: "CONNECTX"},
		{name: "empty", method: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusedMethod([]byte(tt.method)); got != tt.want {
				t.Errorf("refusedMethod(%q) = %v, want %v", tt.method, got, tt.want)
			}
		})
	}
}

// TestConnect: a CONNECT or TRACE request gets 405 method_not_allowed with an Allow header,
// reaches no backend, takes no lease, and the connection is closed after the answer.
func TestConnect(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test", "evil.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	tests := []struct {
		name    string
		request string
	}{
		{name: "authority form", request: "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n"},
		{name: "origin form to an app", request: "CONNECT / HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
		{name: "host matching no app", request: "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"},
		{name: "lower case", request: "connect / HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
		{name: "with a body", request: "CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\n\r\nabc"},
		{name: "with Expect: 100-continue", request: "CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"},
		{name: "TRACE with a cookie", request: "TRACE / HTTP/1.1\r\nHost: shop.test\r\nCookie: session=secret\r\n\r\n"},
		{name: "lower-case trace", request: "trace / HTTP/1.1\r\nHost: shop.test\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, e.ln, nil)
			r := rc.exchange(tt.request)
			if r.code != 405 || r.headers["x-pollbal-reason"] != "method_not_allowed" || r.headers["allow"] != allowedMethods {
				t.Fatalf("got %v, want 405 method_not_allowed with Allow", r)
			}
			if r.headers["connection"] != "close" {
				t.Errorf("answer %v does not close the connection", r)
			}
			if _, err := rc.br.ReadByte(); err != io.EOF {
				t.Errorf("read after the answer: %v, want EOF", err)
			}
		})
	}
	e.waitIdle()
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend received %d requests, want 0", n)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="shop",code="405"}`); got != 7 {
		t.Errorf(`requests_total{app="shop",code="405"} = %v, want 7`, got)
	}
}

// TestExpectContinue: a request that asks for "100 Continue" with a Content-Length over
// proxy.max_request_body is answered 413 body_too_large at once, with no "100 Continue" first;
// one within the limit gets "100 Continue" and is forwarded.
func TestExpectContinue(t *testing.T) {
	echo := startBackend(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBody(ctx.Request.Body()) })
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: echo.addr}}, tieBreakID)
	cfg.Proxy.MaxRequestBody = 1000
	e := newEnv(t, cfg, "b1")

	t.Run("over the limit", func(t *testing.T) {
		rc := dialRaw(t, e.ln, nil)
		if _, err := io.WriteString(rc.c, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 209715200\r\nExpect: 100-continue\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rc.br, nil) // a 100 would be returned as is, not skipped
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || resp.Header.Get("X-Pollbal-Reason") != "body_too_large" || string(body) != "request body larger than 1000 bytes\n" {
			t.Fatalf("first answer %d %v %q, want 413 body_too_large", resp.StatusCode, resp.Header, body)
		}
		if !resp.Close {
			t.Errorf("413 does not close the connection")
		}
	})
	t.Run("within the limit", func(t *testing.T) {
		rc := dialRaw(t, e.ln, nil)
		if _, err := io.WriteString(rc.c, "POST / HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		line, err := rc.br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("first line %q (%v), want 100 Continue", line, err)
		}
		if blank, err := rc.br.ReadString('\n'); err != nil || blank != "\r\n" {
			t.Fatalf("after 100 Continue: %q (%v)", blank, err)
		}
		if _, err := io.WriteString(rc.c, "hello"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rc.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "hello" {
			t.Fatalf("answer %d %q, want 200 echoing the body", resp.StatusCode, body)
		}
	})
	e.waitIdle()
	if n := echo.hits.Load(); n != 1 {
		t.Errorf("backend received %d requests, want 1 (the one within the limit)", n)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="shop",code="413"}`); got != 1 {
		t.Errorf(`requests_total{app="shop",code="413"} = %v, want 1`, got)
	}
}

func TestHeaderLines(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		wantCL bool
		wantTE bool
	}{
		{name: "both", raw: "Host: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", wantCL: true, wantTE: true},
		{name: "lower case", raw: "host: a\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n", wantCL: true, wantTE: true},
		{name: "last line without newline", raw: "Host: a\r\nContent-Length: 5", wantCL: true},
		{name: "Transfer-Encoding only", raw: "Host: a\r\nTransfer-Encoding: chunked\r\n\r\n", wantTE: true},
		{name: "only in a value", raw: "X-Note: Content-Length: 5\r\nX-Other: Transfer-Encoding: chunked\r\n"},
		{name: "longer names", raw: "X-Content-Length: 5\r\nTransfer-Encodings: chunked\r\n"},
		{name: "empty", raw: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, te := headerLines([]byte(tt.raw))
			if cl != tt.wantCL || te != tt.wantTE {
				t.Errorf("headerLines(%q) = %v, %v; want %v, %v", tt.raw, cl, te, tt.wantCL, tt.wantTE)
			}
		})
	}
}

// TestSmuggling: requests whose framing is ambiguous or malformed get 400 bad_request and reach
// no backend; the connection is closed, so nothing after them is read as a request.
func TestSmuggling(t *testing.T) {
	be := okBackend(t)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)
	e := newEnv(t, cfg, "b1")
	const head = "POST / HTTP/1.1\r\nHost: shop.test\r\n"
	tests := []struct {
		name    string
		request string
	}{
		{name: "Content-Length then Transfer-Encoding", request: head + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"},
		{name: "Transfer-Encoding then Content-Length", request: head + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n"},
		{name: "lower-case names", request: head + "transfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n"},
		{name: "duplicate Content-Length", request: head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{name: "Content-Length list", request: head + "Content-Length: 5, 5\r\n\r\nhello"},
		{name: "unknown transfer coding", request: head + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "space before the colon", request: head + "Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "coding list", request: head + "Transfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "two Transfer-Encoding lines", request: head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "NUL in a header", request: head + "X-A: a\x00b\r\nContent-Length: 0\r\n\r\n"},
		{name: "bare CR in a header", request: head + "X-A: a\rb\r\nContent-Length: 0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, e.ln, nil)
			r := rc.exchange(tt.request)
			if r.code != 400 || r.headers["x-pollbal-reason"] != "bad_request" || r.headers["connection"] != "close" {
				t.Fatalf("got %v, want 400 bad_request and a close", r)
			}
		})
	}
	e.waitIdle()
	if n := be.hits.Load(); n != 0 {
		t.Errorf("backend received %d requests, want 0", n)
	}
}
