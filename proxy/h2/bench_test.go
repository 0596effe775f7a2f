package h2

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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
// are). The client writes and reads raw frames, so that the profile is the server's.
func BenchmarkStreams(b *testing.B) {
	bodies := &sync.Pool{}
	bodies.New = func() any { return &streamBody{pool: bodies} }
	handlers := []struct {
		name string
		h    fasthttp.RequestHandler
	}{
		{"whole", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain")
			ctx.Response.Header.Set("X-Pollbal-Backend", "b1")
			ctx.SetBody(body1K)
		}},
		{"streamed", func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain")
			ctx.Response.Header.Set("X-Pollbal-Backend", "b1")
			sb := bodies.Get().(*streamBody)
			sb.r.Reset(body1K)
			ctx.Response.SetBodyStream(sb, len(body1K))
		}},
	}
	for _, hh := range handlers {
		for _, streams := range []int{1, 10, 100} {
			b.Run(hh.name+"/m="+itoa(streams), func(b *testing.B) {
				addr := serveBench(b, hh.h)
				cl := dialBench(b, addr)
				b.ReportAllocs()
				b.ResetTimer()
				if err := cl.run(b.N, streams); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func itoa(n int) string {
	switch n {
	case 1:
		return "1"
	case 10:
		return "10"
	}
	return "100"
}

func serveBench(b *testing.B, h fasthttp.RequestHandler) string {
	b.Helper()
	s, err := New(Options{Handler: h, MaxConcurrentStreams: 250, Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Shutdown(ctx)
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
			go func() { defer wg.Done(); s.ServeConn(c, ProtoCleartext, false) }()
		}
	}()
	return ln.Addr().String()
}

// benchClient is a raw HTTP/2 client: one goroutine writes HEADERS frames, the reader counts
// ended streams and returns flow-control credit.
type benchClient struct {
	c     net.Conn
	mu    sync.Mutex // guards bw and fr's writes
	bw    *bufio.Writer
	fr    *http2.Framer
	block []byte // the request's header block
}

func dialBench(b *testing.B, addr string) *benchClient {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	cl := &benchClient{c: c, bw: bufio.NewWriterSize(c, 64<<10)}
	cl.fr = http2.NewFramer(cl.bw, bufio.NewReaderSize(c, 64<<10))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "www.shop.test"},
		{":path", "/index.html?q=1"}, {"user-agent", "bench"}, {"accept", "*/*"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	cl.block = hb.Bytes()
	_, _ = cl.bw.WriteString(http2.ClientPreface)
	_ = cl.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	_ = cl.fr.WriteWindowUpdate(0, 1<<30)
	if err := cl.bw.Flush(); err != nil {
		b.Fatal(err)
	}
	return cl
}

// run sends n requests, streams at a time, and returns once all were answered.
func (cl *benchClient) run(n, streams int) error {
	credit := make(chan struct{}, streams)
	for range streams {
		credit <- struct{}{}
	}
	errc := make(chan error, 1)
	go func() { errc <- cl.read(n, credit) }()
	id := uint32(1)
	for i := 0; i < n; i++ {
		select {
		case <-credit:
		case err := <-errc:
			return err
		}
		// Send what is due in one write: a batch of streams whose credit is already there.
		cl.mu.Lock()
		if err := cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: cl.block, EndStream: true, EndHeaders: true}); err != nil {
			cl.mu.Unlock()
			return err
		}
		id += 2
		for ; i+1 < n && len(credit) > 0; i++ {
			<-credit
			_ = cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: cl.block, EndStream: true, EndHeaders: true})
			id += 2
		}
		err := cl.bw.Flush()
		cl.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return <-errc
}

func (cl *benchClient) read(n int, credit chan<- struct{}) error {
	var owed uint32
	for done := 0; done < n; {
		f, err := cl.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				cl.mu.Lock()
				_ = cl.fr.WriteSettingsAck()
				err = cl.bw.Flush()
				cl.mu.Unlock()
			}
		case *http2.DataFrame:
			owed += f.Length
			if f.StreamEnded() {
				done++
				credit <- struct{}{}
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				done++
				credit <- struct{}{}
			}
		case *http2.RSTStreamFrame:
			return errors.New("stream reset by the server")
		case *http2.GoAwayFrame:
			return errors.New("goaway from the server")
		}
		if err != nil {
			return err
		}
		if owed > 1<<28 {
			cl.mu.Lock()
			_ = cl.fr.WriteWindowUpdate(0, owed)
			err = cl.bw.Flush()
			cl.mu.Unlock()
			owed = 0
			if err != nil {
				return err
			}
		}
	}
	return nil
}
