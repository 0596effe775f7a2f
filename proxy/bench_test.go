package proxy

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/internal/configtest"
	"pollbal/internal/h2client"
)

var body1K = []byte(strings.Repeat("0123456789abcdef", 64))

// benchEnv is a proxy on an in-memory listener in front of one real fasthttp backend on
// 127.0.0.1 that answers 1 KiB, with room for any number of concurrent requests.
func benchEnv(tb testing.TB) *env { return benchEnvLogging(tb, "") }

// benchEnvLogging is benchEnv with its access log in JSON at path ("": off), logging
// Referer and User-Agent as fields of their own too.
func benchEnvLogging(tb testing.TB, path string) *env {
	be := startBackend(tb, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBody(body1K)
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test", "*.shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 4096}}, tieBreakID)

	var alog *accesslog.Logger
	if path != "" {
		var err error
		alog, err = accesslog.New(accesslog.Options{Config: configs.AccessLog{Path: path, Format: configs.FormatJSON,
			Sample: 1, Buffer: 256 << 10, Headers: []string{"Referer", "User-Agent"}}})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = alog.Close() })
	}
	return newEnvLogging(tb, cfg, alog, "b1")
}

// handlerCall runs the handler on a request context built once, the way fasthttp's server
// reuses one per connection: the request is restored from tmpl before each call.
type handlerCall struct {
	ctx  fasthttp.RequestCtx
	tmpl fasthttp.Request
}

func newHandlerCall() *handlerCall {
	h := &handlerCall{}
	h.tmpl.SetRequestURI("/index.html?q=1")
	h.tmpl.Header.SetHost("www.shop.test")
	h.tmpl.Header.Set("User-Agent", "bench")
	h.tmpl.Header.Set("Accept", "*/*")
	h.ctx.Init(&h.tmpl, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}, nil)
	return h
}

// addHeaders adds the request's headers given as name, value pairs.
func (h *handlerCall) addHeaders(pairs []string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		h.tmpl.Header.Add(pairs[i], pairs[i+1])
	}
}

// serve restores the request from tmpl, runs the handler on it and returns the status code.
func (h *handlerCall) serve(p *Proxy) int {
	h.tmpl.CopyTo(&h.ctx.Request)
	h.ctx.Response.Reset()
	p.Handler(&h.ctx)
	return h.ctx.Response.StatusCode()
}

func (h *handlerCall) run(tb testing.TB, p *Proxy) {
	if h.serve(p) != 200 || len(h.ctx.Response.Body()) != len(body1K) {
		tb.Fatalf("answer %d, %d bytes", h.ctx.Response.StatusCode(), len(h.ctx.Response.Body()))
	}
}

// BenchmarkProxy measures a proxied 1 KiB GET: "handler" calls Handler directly (forward over
// loopback to the backend, no client side); "parallel" goes through the in-memory listener from
// concurrent clients, so its allocs/op include the client's and the backend's.
func BenchmarkProxy(b *testing.B) {
	e := benchEnv(b)
	b.Run("handler", func(b *testing.B) {
		h := newHandlerCall()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			h.run(b, e.p)
		}
	})
	// The same with the access log on: JSON lines to a file, two headers as fields.
	b.Run("handler-log", func(b *testing.B) {
		el := benchEnvLogging(b, filepath.Join(b.TempDir(), "access.log"))
		h := newHandlerCall()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			h.run(b, el.p)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			c := e.newClient()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://www.shop.test/index.html")
			for pb.Next() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("answer %d: %v", resp.StatusCode(), err)
					return
				}
			}
		})
	})
}

// BenchmarkHTTP2 measures proxied 1 KiB GETs as HTTP/2 streams: a raw-frame h2c client on
// 127.0.0.1 keeps streams streams in flight on one connection, each forwarded over loopback to
// the backend; allocs/op include the backend's.
func BenchmarkHTTP2(b *testing.B) {
	be := startBackend(b, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBody(body1K)
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test", "*.shop.test"}}},
		[]configs.Backend{{ID: "b1", Address: be.addr, Capacity: 4096}}, tieBreakID)
	cfg.HTTP2.H2C = true
	e := newEnv(b, cfg, "b1")
	addr := e.serveTCP(b)
	for _, streams := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("m=%d", streams), func(b *testing.B) {
			cl, err := h2client.Dial(addr, "www.shop.test", "/index.html")
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			b.ReportAllocs()
			b.ResetTimer()
			if err := cl.Run(b.N, streams); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkOwnAnswer measures a request pollbal answers itself (404 no_app: no backend, no
// network), with the access log off and on: what the request ID and the access log cost a
// request, without a round trip's noise around it.
func BenchmarkOwnAnswer(b *testing.B) {
	for _, bc := range []struct {
		name string
		log  bool
	}{{name: "log-off"}, {name: "log-on", log: true}} {
		b.Run(bc.name, func(b *testing.B) {
			path := ""
			if bc.log {
				path = filepath.Join(b.TempDir(), "access.log")
			}
			e := benchEnvLogging(b, path)
			h := newHandlerCall()
			h.tmpl.Header.SetHost("other.test")
			b.ReportAllocs()
			code := 0
			for b.Loop() {
				code = h.serve(e.p)
			}
			if code != 404 {
				b.Fatalf("answer %d, want 404", code)
			}
		})
	}
}

// BenchmarkPrepareRequest measures the header rewriting alone (hop-by-hop scan and
// X-Forwarded-*), for a bare request and a browser-like one.
func BenchmarkPrepareRequest(b *testing.B) {
	for _, bc := range []struct {
		name    string
		headers []string
	}{
		{name: "bare"},
		{name: "browser", headers: []string{"Connection", "keep-alive", "Accept", "text/html", "Accept-Language", "en",
			"Accept-Encoding", "gzip, br", "Cookie", "a=1; b=2", "X-Forwarded-For", "127.0.0.9"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			untrusted := newTrustedNets(&configs.Config{})
			h := newHandlerCall()
			h.addHeaders(bc.headers)
			b.ReportAllocs()
			for b.Loop() {
				h.tmpl.CopyTo(&h.ctx.Request)
				h.ctx.URI() // parsed before the handler runs, as fasthttp's server does
				prepareRequest(&h.ctx, untrusted)
			}
		})
		b.Run(bc.name+"/copy-only", func(b *testing.B) { // the baseline to subtract
			h := newHandlerCall()
			h.addHeaders(bc.headers)
			for b.Loop() {
				h.tmpl.CopyTo(&h.ctx.Request)
				h.ctx.URI()
			}
		})
	}
}

// BenchmarkRelayResponse measures what a backend's response header goes through before it is
// written to the client (hop-by-hop scan, X-Pollbal-Backend and X-Pollbal-Pool), on the header
// a typical backend sends.
func BenchmarkRelayResponse(b *testing.B) {
	var tmpl, h fasthttp.ResponseHeader
	tmpl.DisableNormalizing() // as RoundTrip reads it
	tmpl.SetContentType("text/plain")
	tmpl.SetContentLength(len(body1K))
	tmpl.Set("Date", "Wed, 02 Dec 2026 03:00:00 GMT")
	tmpl.Set("Cache-Control", "no-store")
	b.ReportAllocs()
	for b.Loop() {
		tmpl.CopyTo(&h)
		relayResponse(&h, "b1", "primary", []byte("0123456789abcdef0123456789abcdef"))
	}
}
