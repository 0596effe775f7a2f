package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// taintingBackend is a keep-alive HTTP/1.1 server on 127.0.0.1, written on net.Listener so it
// can misbehave: it answers HEAD with a Content-Length but no body, /204 with 204 and /304 with
// 304 (none of which has a body), every other request with 200 "ok", and hands the connection
// of each bodiless answer to the test, which then writes bytes after the response.
type taintingBackend struct {
	addr     string
	dials    atomic.Int64  // connections accepted
	bodiless chan net.Conn // the connection of each bodiless answer, once it is written
}

func startTaintingBackend(t *testing.T) *taintingBackend {
	t.Helper()
	b := &taintingBackend{bodiless: make(chan net.Conn, 4)}
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
		if reply[9:12] != "200" || req.Method == http.MethodHead {
			b.bodiless <- c
		}
	}
}

// unacked is the number of bytes written on c that its peer has not acknowledged yet (Linux
// TIOCOUTQ): 0 once they are in the peer's receive queue.
func unacked(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// TestBytesAfterBodilessResponseDoNotReachNextRequest: a backend that writes bytes after a
// response that has no body by definition (to HEAD, a 204, a 304) has left its connection out
// of step; the bytes arrive after pollbal read the response and pooled the connection. The
// next request must not read them as its response (a 502, or worse a forged answer): it goes
// out on a new connection and gets the backend's real 200.
func TestBytesAfterBodilessResponseDoNotReachNextRequest(t *testing.T) {
	tests := []struct {
		name, method, path string
		wantCode           int
		extra              string
	}{
		{name: "body sent after a HEAD answer", method: "HEAD", path: "/", wantCode: 200, extra: "hello"},
		{name: "garbage after a 204", method: "GET", path: "/204", wantCode: 204, extra: "garbage\r\n"},
		{name: "a forged response after a 304", method: "GET", path: "/304", wantCode: 304,
			extra: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			be := startTaintingBackend(t)
			cfg := testConfig([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}},
				[]configs.Backend{{ID: "b1", Address: be.addr}})
			e := newEnv(t, cfg, "b1")

			if r := e.do(tt.method, "shop.test", tt.path, ""); r.code != tt.wantCode {
				t.Fatalf("%s %s: %v, want %d", tt.method, tt.path, r, tt.wantCode)
			}
			c := <-be.bodiless
			if _, err := c.Write([]byte(tt.extra)); err != nil {
				t.Fatal(err)
			}
			testproc.WaitFor(t, 5*time.Second, "the extra bytes to reach pollbal's side", func() bool {
				return unacked(t, c) == 0
			})

			r := e.do("GET", "shop.test", "/", "")
			if r.code != 200 || r.body != "ok" {
				t.Fatalf("next request: %v, want 200 \"ok\" from the backend", r)
			}
			if n := be.dials.Load(); n != 2 {
				t.Errorf("%d connections to the backend, want 2 (the tainted one closed, a fresh one for the next request)", n)
			}
		})
	}
}
