package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

// taintingBackend is a keep-alive HTTP/1.1 server on 127.0.0.1, written on net.Listener so it
// can misbehave: it answers HEAD with a Content-Length but no body, /204 with 204 and /304 with
// 304 (none of which has a body), every other request with 200 "ok". After a bodiless answer it
// reads on (up to 5 s), reports to the test what that read got, writes a forged response on the
// connection anyway, and goes on serving it if it can.
type taintingBackend struct {
	addr     string
	dials    atomic.Int64    // connections accepted
	bodiless chan afterwards // what the read after each bodiless answer got
}

// afterwards is what a backend's read after its answer got.
type afterwards struct {
	n   int
	err error
}

const forgedResponse = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"

func startTaintingBackend(t *testing.T) *taintingBackend {
	t.Helper()
	b := &taintingBackend{bodiless: make(chan afterwards, 4)}
	b.addr = testproc.ServeLocal(t, b.serve)
	return b
}

func (b *taintingBackend) serve(c net.Conn) {
	b.dials.Add(1)
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		var reply string
		switch {
		case req.Method == http.MethodHead:
			reply = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
		case req.URL.Path == "/204":
			reply = "HTTP/1.1 204 No Content\r\n\r\n"
		case req.URL.Path == "/304":
			reply = "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"
		default:
			reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
		if reply[9:12] == "200" && req.Method != http.MethodHead {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = br.Peek(1)
		b.bodiless <- afterwards{n: br.Buffered(), err: err}
		_ = c.SetReadDeadline(time.Time{})
		if _, err := c.Write([]byte(forgedResponse)); err != nil {
			return
		}
	}
}

// TestNoReuseAfterBodilessAnswer: a connection whose answer has no body by definition (to
// HEAD, a 204, a 304) is closed by pollbal as soon as the answer is read, never pooled: the
// backend's next read on it ends, the forged response it writes there afterwards reaches no
// request, and the next request goes out on a fresh connection and gets the backend's real 200.
// That connection, whose answer had a framed body, is reused by the request after it.
func TestNoReuseAfterBodilessAnswer(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantCode           int
	}{
		{name: "HEAD", method: "HEAD", path: "/", wantCode: 200},
		{name: "204", method: "GET", path: "/204", wantCode: 204},
		{name: "304", method: "GET", path: "/304", wantCode: 304},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startTaintingBackend(t)
			cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)

			e := newEnv(t, cfg, "b1")

			if r := e.do(tt.method, "shop.test", tt.path, ""); r.code != tt.wantCode {
				t.Fatalf("%s %s: %v, want %d", tt.method, tt.path, r, tt.wantCode)
			}
			if got := <-be.bodiless; got.n != 0 || got.err == nil || errors.Is(got.err, os.ErrDeadlineExceeded) {
				t.Fatalf("the backend's read after its answer: %d bytes, %v; want the connection closed by pollbal", got.n, got.err)
			}

			r := e.do("GET", "shop.test", "/", "")
			if r.code != 200 || r.body != "ok" {
				t.Fatalf("next request: %v, want 200 \"ok\" from the backend", r)
			}
			r = e.do("GET", "shop.test", "/", "")
			if r.code != 200 || r.body != "ok" {
				t.Fatalf("third request: %v, want 200 \"ok\" from the backend", r)
			}
			if n := be.dials.Load(); n != 2 {
				t.Errorf("%d connections to the backend, want 2 (the bodiless answer's, closed; a fresh one kept for the two GETs)", n)
			}
		})
	}
}
