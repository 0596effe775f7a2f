package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

// earlyAnswer is the 413 an earlyBackend answers before reading the body.
const earlyAnswer = "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"

// earlyBackend returns a 127.0.0.1 address whose server reads a request's header and the first
// 4 KiB of its body, answers earlyAnswer and closes the connection without reading the rest, as
// a server refusing a large upload does (RFC 9112 §9.5): with fin set it shuts its sending
// side first (a FIN, then the close); else it closes at once. Either way the close finds
// unread bytes, so the kernel resets the connection, and pollbal's send fails.
func earlyBackend(t testing.TB, fin bool) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	return testproc.ServeLocal(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		hits.Add(1)
		if _, err := io.CopyN(io.Discard, req.Body, 4<<10); err != nil {
			return
		}
		if _, err := io.WriteString(c, earlyAnswer); err != nil {
			return
		}
		if fin {
			_ = c.(*net.TCPConn).CloseWrite()
		}
	}), hits
}

// TestEarlyAnswerReachesClient: a backend that answers 413 to an upload before reading it and
// then closes makes pollbal's send fail; the 413 and its body still reach the client as the
// backend's answer, the backend is not ejected (eject_after is 1 here, so one failure would
// eject it), and the request is not retried (the other backend, which answers the same way,
// would have seen it too). Streamed bodies and buffered ones (which pollbal may retry) alike.
func TestEarlyAnswerReachesClient(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fin    bool
		method string
		buffer int // proxy.buffer_request_body
	}{
		{name: "streamed body, backend resets", method: "POST", buffer: 64 << 10},
		{name: "streamed body, backend half-closes first", fin: true, method: "POST", buffer: 64 << 10},
		{name: "buffered PUT, backend resets", method: "PUT", buffer: 8 << 20},
		{name: "buffered PUT, backend half-closes first", fin: true, method: "PUT", buffer: 8 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a1, hits1 := earlyBackend(t, tt.fin)
			a2, hits2 := earlyBackend(t, tt.fin)
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: a1}, {ID: "b2", Address: a2}}, tieBreakID)

			cfg.Proxy.BufferRequestBody = tt.buffer
			cfg.Proxy.MaxRequestBody = 16 << 20
			cfg.Proxy.EjectAfter = 1
			e := newEnv(t, cfg, "b1", "b2")
			addr := e.serveTCP(t)

			const uploads = 3
			for i := 0; i < uploads; i++ {
				code, reason, backend, body := upload(t, addr, tt.method, 4<<20)
				if code != 413 || body != "too large" || reason != "" || (backend != "b1" && backend != "b2") {
					t.Fatalf("upload %d: %d %q (reason %q, backend %q), want the backend's 413 \"too large\"", i, code, body, reason, backend)
				}
			}
			e.waitIdle()
			if n := hits1.Load() + hits2.Load(); n != uploads {
				t.Errorf("the backends saw %d requests, want %d (one each, no retry)", n, uploads)
			}
			for _, id := range []string{"b1", "b2"} {
				if backendOf(t, e.bal, id).Ejected() {
					t.Errorf("%s ejected", id)
				}
			}
		})
	}
}

// upload sends a request with an n-byte body to addr on a new TCP connection, writing the
// body while it reads the answer (as a client must, when the answer may come first), and
// returns the answer's status, X-Pollbal-Reason, X-Pollbal-Backend and body.
func upload(t *testing.T, addr, method string, n int) (code int, reason, backend, body string) {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() {
		// pollbal may answer and close before it has read everything: a failed write is fine.
		head := fmt.Sprintf("%s /upload HTTP/1.1\r\nHost: shop.test\r\nContent-Length: %d\r\n\r\n", method, n)
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		_, _ = io.Copy(c, io.LimitReader(zeros{}, int64(n)))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("answer's body: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"), resp.Header.Get("X-Pollbal-Backend"), string(b)
}

// zeros is an endless reader of "0".
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}
