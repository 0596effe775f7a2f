package h2

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/internal/h2client"
	"pollbal/internal/testproc"
)

func TestFillRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/a/b?c=1", strings.NewReader("hello"))
	r.Host = "shop.test"
	r.Header.Add("X-Multi", "1")
	r.Header.Add("X-Multi", "2")
	r.Header.Set("Host", "other.test") // :authority wins
	var req fasthttp.Request
	fillRequest(&req, r, r.Body)
	h := &req.Header
	if string(h.Method()) != "POST" || string(h.RequestURI()) != "/a/b?c=1" || string(h.Host()) != "shop.test" ||
		string(h.Protocol()) != protoHTTP2 {
		t.Errorf("got %s %s host %s proto %s", h.Method(), h.RequestURI(), h.Host(), h.Protocol())
	}
	var multi []string
	for k, v := range h.All() {
		if string(k) == "X-Multi" {
			multi = append(multi, string(v))
		}
	}
	if strings.Join(multi, ",") != "1,2" {
		t.Errorf("X-Multi %v, want [1 2]", multi)
	}
	if !req.IsBodyStream() || h.ContentLength() != 5 {
		t.Fatalf("body stream %v, length %d; want a stream of 5", req.IsBodyStream(), h.ContentLength())
	}
	if body, _ := io.ReadAll(req.BodyStream()); string(body) != "hello" {
		t.Errorf("body %q", body)
	}

	get := httptest.NewRequest(http.MethodGet, "/", http.NoBody)
	var none fasthttp.Request
	fillRequest(&none, get, nil)
	if none.IsBodyStream() || len(none.Body()) != 0 {
		t.Error("a request without a body got one")
	}
}

// closeCounter is a streamed body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func newTestStream(t *testing.T, w http.ResponseWriter) (*StreamConn, context.CancelFunc) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	return &StreamConn{ctx: ctx, conn: &clientConn{Conn: a}, w: w, left: -1}, cancel
}

func TestWriteResponse(t *testing.T) {
	tests := []struct {
		name       string
		head       bool
		build      func(resp *fasthttp.Response) *closeCounter
		wantCode   int
		wantBody   string
		wantLength string // "" for none
	}{
		{name: "whole body, connection headers dropped", build: func(resp *fasthttp.Response) *closeCounter {
			resp.SetStatusCode(201)
			resp.Header.Set("X-Pollbal-Backend", "web-1")
			resp.Header.Set("Keep-Alive", "timeout=5")
			resp.Header.SetConnectionClose()
			resp.SetBodyString("made")
			return nil
		}, wantCode: 201, wantBody: "made", wantLength: "4"},
		{name: "streamed, length unknown", build: func(resp *fasthttp.Response) *closeCounter {
			b := &closeCounter{Reader: strings.NewReader(strings.Repeat("x", 100000))}
			resp.SetBodyStream(b, -1)
			return b
		}, wantCode: 200, wantBody: strings.Repeat("x", 100000)},
		{name: "streamed, length known", build: func(resp *fasthttp.Response) *closeCounter {
			b := &closeCounter{Reader: strings.NewReader("12345")}
			resp.SetBodyStream(b, 5)
			return b
		}, wantCode: 200, wantBody: "12345", wantLength: "5"},
		{name: "HEAD keeps the length, sends no body", head: true, build: func(resp *fasthttp.Response) *closeCounter {
			resp.Header.SetContentLength(1234)
			resp.SkipBody = true
			return nil
		}, wantCode: 200, wantLength: "1234"},
		{name: "204 without length", build: func(resp *fasthttp.Response) *closeCounter {
			resp.SetStatusCode(204)
			return nil
		}, wantCode: 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sc, cancel := newTestStream(t, rec)
			defer cancel()
			var resp fasthttp.Response
			body := tt.build(&resp)
			var hb headerBuf
			if !writeResponse(rec, sc, &resp, tt.head, &hb) {
				t.Error("writeResponse reported an incomplete response")
			}
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %.40q, want %d %.40q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if got := rec.Header().Get("Content-Length"); got != tt.wantLength {
				t.Errorf("Content-Length %q, want %q", got, tt.wantLength)
			}
			for _, name := range []string{"Connection", "Keep-Alive", "Transfer-Encoding"} {
				if v := rec.Header().Get(name); v != "" {
					t.Errorf("%s: %q sent on HTTP/2", name, v)
				}
			}
			if body != nil && body.closed != 1 {
				t.Errorf("streamed body closed %d times, want 1", body.closed)
			}
			if !rec.Flushed && body != nil {
				t.Error("streamed body not flushed")
			}
		})
	}
}

func TestStreamGone(t *testing.T) {
	sc, cancel := newTestStream(t, httptest.NewRecorder())
	if gone, ok := StreamGone(sc); !ok || gone {
		t.Errorf("open stream: gone %v, is stream %v", gone, ok)
	}
	cancel()
	if gone, ok := StreamGone(sc); !ok || !gone {
		t.Errorf("reset stream: gone %v, is stream %v", gone, ok)
	}
	if gone, ok := StreamGone(&tlsStreamConn{StreamConn: *sc}); !ok || !gone {
		t.Errorf("reset TLS stream: gone %v, is stream %v", gone, ok)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := StreamGone(a); ok {
		t.Error("a plain connection taken for a stream")
	}
}

// Regression: the proxy's watchdog asks a forward's client connection whether it went away
// from its own goroutine, possibly after the stream ended. A StreamConn pooled with the
// stream's other state was then another stream's (or zeroed: a nil pointer panic under
// h2load -m 100). Each stream gets its own, which stays gone once its stream ended.
func TestStreamConnOutlivesItsStream(t *testing.T) {
	conns := make(chan net.Conn, 2)
	addr := serveAdapter(t, func(ctx *fasthttp.RequestCtx) {
		conns <- ctx.Conn()
		ctx.SetBodyString("ok")
	})
	cl, err := h2client.Dial(addr, "shop.test", "/")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Run(1, 1); err != nil {
		t.Fatal(err)
	}
	first := <-conns
	testproc.WaitFor(t, 5*time.Second, "the first stream gone", func() bool {
		gone, _ := StreamGone(first)
		return gone
	})
	if err := cl.Run(1, 1); err != nil {
		t.Fatal(err)
	}
	second := <-conns
	if first == second {
		t.Fatal("the second stream got the first one's connection")
	}
	if gone, isStream := StreamGone(first); !isStream || !gone {
		t.Errorf("first stream after the second: gone %v, is stream %v; want gone", gone, isStream)
	}
}

func TestHeaderBufFill(t *testing.T) {
	tests := []struct {
		name   string
		fields [][2]string
		length int
		want   http.Header
	}{
		{name: "fields and the length", fields: [][2]string{{"X-Pollbal-Backend", "web-1"}, {"Cache-Control", "no-store"}},
			length: 1024, want: http.Header{"X-Pollbal-Backend": {"web-1"}, "Cache-Control": {"no-store"}, "Content-Length": {"1024"}}},
		{name: "a repeated field keeps every value", fields: [][2]string{{"X-Multi", "1"}, {"X-Other", "o"}, {"X-Multi", "2"}},
			length: -1, want: http.Header{"X-Multi": {"1", "2"}, "X-Other": {"o"}}},
		{name: "connection-specific fields and the handler's length dropped",
			fields: [][2]string{{"Keep-Alive", "timeout=5"}, {"Upgrade", "h2c"}, {"Content-Length", "99"}, {"X-Kept", "k"}},
			length: 0, want: http.Header{"X-Kept": {"k"}, "Content-Length": {"0"}}},
	}
	var hb headerBuf
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp fasthttp.Response
			for _, f := range tt.fields {
				resp.Header.Add(f[0], f[1])
			}
			hdr := http.Header{}
			hb.fill(hdr, &resp.Header, tt.length)
			hb.reset()
			// Refilled with other fields, the buffer must not change what hdr holds.
			var other fasthttp.Response
			other.Header.Set("X-Overwrite", strings.Repeat("z", 64))
			hb.fill(http.Header{}, &other.Header, 5)
			hb.reset()
			delete(hdr, "Content-Type") // fasthttp's default, not under test here
			if !reflect.DeepEqual(hdr, tt.want) {
				t.Errorf("got %v, want %v", hdr, tt.want)
			}
		})
	}
}
