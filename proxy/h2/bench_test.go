//lint:file-ignore SA1019 the floor benchmark serves with x/net/http2's ServeConn, as Server does (see server.go).

package h2

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"pollbal/internal/h2client"
)

var body1K = []byte(strings.Repeat("0123456789abcdef", 64))

// streamBody is a streamed response body of known length with a WriteTo, the shape of the
// proxy's backend bodies (upstream.ResponseBody); Close puts it back in its pool.
type streamBody struct {
	r    bytes.Reader
	pool *sync.Pool
}

func (b *streamBody) Read(p []byte) (int, error)         { return b.r.Read(p) }
func (b *streamBody) WriteTo(w io.Writer) (int64, error) { return b.r.WriteTo(w) }
func (b *streamBody) Close() error                       { b.pool.Put(b); return nil }

// BenchmarkStreams drives requests over one h2c connection on 127.0.0.1, with streams
// streams in flight at a time, through the adapter into a handler that answers 1 KiB whole
// (as the proxy's own answers are) or streamed with its length known (as backend responses
// are). "xnet" is the floor: x/net/http2's server alone, answering the same with an
// http.Handler. The client writes and reads raw frames, so that the profile is the server's.
func BenchmarkStreams(b *testing.B) {
	bodies := &sync.Pool{}
	bodies.New = func() any { return &streamBody{pool: bodies} }
	servers := []struct {
		name  string
		serve func(b *testing.B) string
	}{
		{"whole", func(b *testing.B) string {
			return serveAdapter(b, func(ctx *fasthttp.RequestCtx) {
				ctx.SetContentType("text/plain")
				ctx.Response.Header.Set("X-Pollbal-Backend", "b1")
				ctx.SetBody(body1K)
			})
		}},
		{"streamed", func(b *testing.B) string {
			return serveAdapter(b, func(ctx *fasthttp.RequestCtx) {
				ctx.SetContentType("text/plain")
				ctx.Response.Header.Set("X-Pollbal-Backend", "b1")
				sb := bodies.Get().(*streamBody)
				sb.r.Reset(body1K)
				ctx.Response.SetBodyStream(sb, len(body1K))
			})
		}},
		{"xnet", serveXNet},
	}
	for _, sv := range servers {
		for _, streams := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/m=%d", sv.name, streams), func(b *testing.B) {
				addr := sv.serve(b)
				cl, err := h2client.Dial(addr, "www.shop.test", "/index.html?q=1")
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
}

// serveAdapter serves h2c on 127.0.0.1 with a Server running h, until the test ends.
func serveAdapter(tb testing.TB, h fasthttp.RequestHandler) string {
	tb.Helper()
	s, err := New(Options{Handler: h, MaxConcurrentStreams: 250, Registerer: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	return serveConns(tb, func(c net.Conn) { s.ServeConn(c, ProtoCleartext, false) }, func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Shutdown(ctx)
	})
}

// serveXNet serves h2c on 127.0.0.1 with x/net/http2's server alone, as Server configures it,
// and a handler that answers what the adapter's handlers answer.
func serveXNet(b *testing.B) string {
	b.Helper()
	s, err := New(Options{Handler: func(*fasthttp.RequestCtx) {}, MaxConcurrentStreams: 250, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hdr := w.Header()
		hdr["Content-Type"] = []string{"text/plain"}
		hdr["X-Pollbal-Backend"] = []string{"b1"}
		hdr["Content-Length"] = []string{"1024"}
		_, _ = w.Write(body1K)
	})
	var conns sync.WaitGroup
	stop := make(chan struct{})
	return serveConns(b, func(c net.Conn) {
		conns.Add(1)
		defer conns.Done()
		go func() { <-stop; _ = c.Close() }()
		s.h2.ServeConn(c, &http2.ServeConnOpts{BaseConfig: s.base, Handler: h})
	}, func() { close(stop); conns.Wait() })
}

// serveConns accepts connections on 127.0.0.1 and serves each with serve, until the
// test ends: then stop ends them.
func serveConns(tb testing.TB, serve func(net.Conn), stop func()) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		_ = ln.Close()
		stop()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}
