package main

// End-to-end: what crosses pollbal on the wire, with the real binary — a backend's early
// answer to an upload, late bytes after answers without a body, header names, userinfo,
// TRACE, and X-Pollbal-* headers a backend sets.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// scriptedBackend is a backend on a raw socket, for answers the example backend cannot give:
// it answers GET /pool with "web serving v1" and hands every other request to answer, which
// writes the response itself and reports whether to go on reading the connection (else it is
// closed).
func scriptedBackend(t *testing.T, answer func(c net.Conn, req *http.Request) bool) string {
	t.Helper()
	return testproc.ServeLocal(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/pool" {
				_, _ = io.Copy(io.Discard, req.Body)
				if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nweb serving v1\n"); err != nil {
					return
				}
				continue
			}
			if !answer(c, req) {
				return
			}
		}
	})
}

// backendState is a backend's readiness and ejection in /api/state.
type backendState struct {
	ID      string `json:"id"`
	Ready   bool   `json:"ready"`
	Ejected bool   `json:"ejected"`
}

func backendStates(t *testing.T, pb *instance) []backendState {
	t.Helper()
	var s struct {
		Backends []backendState `json:"backends"`
	}
	getJSON(t, "http://"+pb.admin+"/api/state", &s)
	return s.Backends
}

// earlyAnswer is what an early-answering backend sends before it has read the upload.
const earlyAnswer = "HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\ntoo large\n"

// earlyBackend answers every request earlyAnswer after reading its header and the first
// 64 KiB of its body, and then closes the connection as a server refusing an upload does:
// with fin set it first shuts down its sending side (a FIN), then closes; else it closes at
// once. The close finds the rest of the upload unread, so the kernel resets the connection
// either way, and pollbal's send fails. seen counts the requests.
func earlyBackend(t *testing.T, fin bool) (addr string, seen *atomic.Int64) {
	seen = new(atomic.Int64)
	return scriptedBackend(t, func(c net.Conn, req *http.Request) bool {
		seen.Add(1)
		if _, err := io.CopyN(io.Discard, req.Body, 64<<10); err != nil {
			return false
		}
		if _, err := io.WriteString(c, earlyAnswer); err != nil {
			return false
		}
		if fin {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		return false
	}), seen
}

// TestEndToEndEarlyAnswerReachesClient: ten 8 MiB uploads to backends that answer 413 before
// reading them and close (one half-closes first, one resets at once) all get the backend's
// 413 and its body, each backend saw exactly the uploads answered in its name (no retry:
// the other backend would have seen it too), and both stay ready and not ejected — with a
// streamed body, and with a buffered PUT, which pollbal may retry after a failed connection.
func TestEndToEndEarlyAnswerReachesClient(t *testing.T) {
	for _, tt := range []struct {
		name, proxyKeys, method string
	}{
		{name: "streamed body", proxyKeys: "{}", method: "POST"},
		{name: "buffered body", proxyKeys: "{buffer_request_body: 16777216, max_request_body: 16777216}", method: "PUT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			finAddr, finSeen := earlyBackend(t, true)
			rstAddr, rstSeen := earlyBackend(t, false)
			pb := startOver(t, tt.proxyKeys, finAddr, rstAddr)
			answered := map[string]int64{}
			for i := 0; i < 10; i++ {
				resp, body := uploadThrough(t, pb, tt.method, 8<<20)
				backend := resp.Header.Get("X-Pollbal-Backend")
				if resp.StatusCode != 413 || body != "too large\n" || resp.Header.Get("X-Pollbal-Reason") != "" {
					t.Errorf("upload %d: %d %q (X-Pollbal-Reason %q, backend %q), want the backend's 413 \"too large\"",
						i, resp.StatusCode, body, resp.Header.Get("X-Pollbal-Reason"), backend)
				}
				answered[backend]++
			}
			if got, want := finSeen.Load(), answered["web-1"]; got != want {
				t.Errorf("web-1 (half-closes) saw %d uploads, answered %d", got, want)
			}
			if got, want := rstSeen.Load(), answered["web-2"]; got != want {
				t.Errorf("web-2 (resets) saw %d uploads, answered %d", got, want)
			}
			if answered["web-1"] == 0 || answered["web-2"] == 0 {
				t.Errorf("answers by backend %v: want both ways of closing tried", answered)
			}
			for _, b := range backendStates(t, pb) {
				if !b.Ready || b.Ejected {
					t.Errorf("%s: ready %v, ejected %v; want ready, not ejected", b.ID, b.Ready, b.Ejected)
				}
			}
		})
	}
}

// uploadThrough sends a request with an n-byte body through pollbal on a new connection,
// writing the body while it reads the answer (an answer may come before the body is sent, and
// pollbal may then close without reading the rest), and returns the answer and its body.
func uploadThrough(t *testing.T, pb *instance, method string, n int) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", pb.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() {
		head := fmt.Sprintf("%s /upload HTTP/1.1\r\nHost: shop.test\r\nContent-Length: %d\r\n\r\n", method, n)
		if _, err := io.WriteString(c, head); err != nil {
			return
		}
		_, _ = io.Copy(c, io.LimitReader(filler{}, int64(n)))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("answer's body: %v", err)
	}
	return resp, string(body)
}

// filler is an endless reader of "x".
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// lateBackend answers by path, naming in X-Id the id its request carried (query "id"): HEAD
// with 200 and a Content-Length but no body, GET /204 with 204, any other GET with 200 and
// the body "id=<id>". After each HEAD and 204 answer it also sends, delay later on the same
// connection, a complete response of its own (X-Id: late), as a backend out of step does.
// The test runs in rounds (one per delay); late counts, for each round, the late responses
// due so far of the answers given in it (sent, or refused by a closed connection).
type lateBackend struct {
	addr  string
	round atomic.Int64
	delay atomic.Int64 // nanoseconds
	late  [8]atomic.Int64
}

const lateResponse = "HTTP/1.1 200 OK\r\nX-Id: late\r\nContent-Length: 4\r\n\r\nlate"

func startLateBackend(t *testing.T) *lateBackend {
	b := &lateBackend{}
	b.addr = scriptedBackend(t, func(c net.Conn, req *http.Request) bool {
		_, _ = io.Copy(io.Discard, req.Body)
		id := req.URL.Query().Get("id")
		var reply string
		switch {
		case req.Method == http.MethodHead:
			reply = "HTTP/1.1 200 OK\r\nX-Id: " + id + "\r\nContent-Length: 5\r\n\r\n"
		case req.URL.Path == "/204":
			reply = "HTTP/1.1 204 No Content\r\nX-Id: " + id + "\r\n\r\n"
		default:
			body := "id=" + id
			reply = "HTTP/1.1 200 OK\r\nX-Id: " + id + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return false
		}
		if req.Method == http.MethodHead || req.URL.Path == "/204" {
			late := &b.late[b.round.Load()]
			time.AfterFunc(time.Duration(b.delay.Load()), func() {
				_, _ = io.WriteString(c, lateResponse)
				late.Add(1)
			})
		}
		return true
	})
	return b
}

// TestEndToEndLateBytesReachNoRequest: a backend sends a complete response of its own 1, 5,
// 50 and 300 ms after each answer without a body (to HEAD, a 204). Four clients send HEAD, a
// GET answered 204 and a plain GET in turn, each with its own id, until at least 40 late
// responses to the answers of the round have been due; every answer they get is the one to their own request (its X-Id,
// its body), never a late response nor another client's answer.
func TestEndToEndLateBytesReachNoRequest(t *testing.T) {
	be := startLateBackend(t)
	pb := startOver(t, "{}", be.addr)
	var nextID atomic.Int64
	for round, delay := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			be.delay.Store(int64(delay))
			be.round.Store(int64(round))
			late := &be.late[round]
			const clients, minLate, minRequests = 4, 40, 30
			var (
				wrong, total atomic.Int64
				mu           sync.Mutex
				firstWrong   string
				wg           sync.WaitGroup
			)
			deadline := time.Now().Add(60 * time.Second)
			for i := 0; i < clients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
					defer client.CloseIdleConnections()
					for n := 0; n < minRequests || late.Load() < minLate; n++ {
						if time.Now().After(deadline) {
							return
						}
						id := strconv.FormatInt(nextID.Add(1), 10)
						if problem := checkOwnAnswer(client, pb, n%3, id); problem != "" {
							wrong.Add(1)
							mu.Lock()
							if firstWrong == "" {
								firstWrong = problem
							}
							mu.Unlock()
						}
						total.Add(1)
					}
				}()
			}
			wg.Wait()
			if n := late.Load(); n < minLate {
				t.Fatalf("only %d late responses were due within 60 s, want %d", n, minLate)
			}
			if n := wrong.Load(); n != 0 {
				t.Errorf("%d of %d answers were not the answer to their own request; the first: %s", n, total.Load(), firstWrong)
			}
		})
	}
}

// checkOwnAnswer sends request kind (0 HEAD, 1 GET /204, 2 GET) with id through pollbal and
// returns what is wrong with the answer, or "" when it is the backend's answer to it.
func checkOwnAnswer(client *http.Client, pb *instance, kind int, id string) string {
	method, path, wantCode, wantBody := http.MethodHead, "/", 200, ""
	switch kind {
	case 1:
		method, path, wantCode = http.MethodGet, "/204", 204
	case 2:
		method, path, wantBody = http.MethodGet, "/", "id="+id
	}
	req, err := http.NewRequest(method, "http://"+pb.listen+path+"?id="+id, nil)
	if err != nil {
		return err.Error()
	}
	req.Host = "shop.test"
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Sprintf("%s %s?id=%s: %v", method, path, id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Sprintf("%s %s?id=%s: body: %v", method, path, id, err)
	}
	if got := resp.Header.Get("X-Id"); resp.StatusCode != wantCode || got != id || string(body) != wantBody {
		return fmt.Sprintf("%s %s?id=%s: %d, X-Id %q, body %q; want %d, X-Id %q, body %q",
			method, path, id, resp.StatusCode, got, body, wantCode, id, wantBody)
	}
	return ""
}

// headersSeen sends raw through pollbal (a request to the example backend's /_backend/headers)
// and returns the header names and values the backend received.
func headersSeen(t *testing.T, pb *instance, raw string) http.Header {
	t.Helper()
	resp, body := dialProxy(t, pb, raw).readAnswer(t)
	if resp.StatusCode != 200 {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	var seen struct {
		Headers http.Header `json:"headers"`
	}
	if err := json.Unmarshal([]byte(body), &seen); err != nil {
		t.Fatalf("%v: %q", err, body)
	}
	return seen.Headers
}

// TestEndToEndHeaderNameRules: header names holding "_" never reach the backend (a CGI-style
// backend would read X_Forwarded_For as X-Forwarded-For), nor do a chunked body's trailer
// fields (as headers: a "Forwarded" one would state the client); a header name that is not a token,
// userinfo in the target or in Host, and TRACE are answered by pollbal itself (400
// bad_request, 400, 405 method_not_allowed), close the connection, and reach no backend.
func TestEndToEndHeaderNameRules(t *testing.T) {
	pb, be := startSingle(t, "{}", "")

	seen := headersSeen(t, pb, "GET /_backend/headers HTTP/1.1\r\nHost: shop.test\r\nX_Forwarded_For: 6.6.6.6\r\n"+
		"X-Real_IP: 6.6.6.6\r\nX_Forwarded_Proto: https\r\nx_custom: 1\r\nX-Custom: 2\r\n\r\n")
	for k, v := range seen {
		if strings.Contains(k, "_") {
			t.Errorf("the backend saw %s: %q", k, v)
		}
	}
	if seen.Get("X-Forwarded-For") != "127.0.0.1" || seen.Get("X-Real-IP") != "127.0.0.1" ||
		seen.Get("X-Forwarded-Proto") != "http" || seen.Get("X-Custom") != "2" {
		t.Errorf("the backend saw %v, want pollbal's client-identity headers and X-Custom", seen)
	}

	// A chunked body's trailer fields, which pollbal would otherwise turn into header fields
	// when it forwards the body with a Content-Length.
	seen = headersSeen(t, pb, "POST /_backend/headers HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n0\r\nForwarded: for=6.6.6.6\r\nX_Bad: 1\r\nX-Trailer: 1\r\n\r\n")
	for _, k := range []string{"Forwarded", "X_bad", "X-Trailer", "Trailer"} {
		if v := seen.Values(k); len(v) != 0 {
			t.Errorf("a trailer field reached the backend as the header %s: %q", k, v)
		}
	}

	before := be.stats(t).Requests
	for _, tt := range []struct {
		name, request, wantReason string
		wantCode                  int
	}{
		{name: "space inside a name", request: "GET / HTTP/1.1\r\nHost: shop.test\r\nFoo Bar: x\r\n\r\n",
			wantCode: 400, wantReason: "bad_request"},
		{name: "control byte in a name", request: "GET / HTTP/1.1\r\nHost: shop.test\r\nFoo\x01: x\r\n\r\n",
			wantCode: 400, wantReason: "bad_request"},
		{name: "separator in a name", request: "GET / HTTP/1.1\r\nHost: shop.test\r\nX(A): x\r\n\r\n",
			wantCode: 400, wantReason: "bad_request"},
		{name: "userinfo in the target", request: "GET http://user:pw@shop.test/ HTTP/1.1\r\nHost: shop.test\r\n\r\n",
			wantCode: 400, wantReason: "bad_request"},
		{name: "userinfo in Host", request: "GET / HTTP/1.1\r\nHost: user@shop.test\r\n\r\n",
			wantCode: 400, wantReason: "bad_request"},
		{name: "TRACE", request: "TRACE / HTTP/1.1\r\nHost: shop.test\r\nCookie: session=secret\r\n\r\n",
			wantCode: 405, wantReason: "method_not_allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialProxy(t, pb, tt.request)
			resp, body := rc.readAnswer(t)
			if resp.StatusCode != tt.wantCode || resp.Header.Get("X-Pollbal-Reason") != tt.wantReason {
				t.Fatalf("answer %d %v %q, want %d %s", resp.StatusCode, resp.Header, body, tt.wantCode, tt.wantReason)
			}
			if rest := rc.readClosed(t); rest != "" {
				t.Errorf("after the answer: %q, want the connection closed", rest)
			}
		})
	}
	// The example backend counts requests to /: one that pollbal forwards shows up.
	if resp, body := dialProxy(t, pb, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n").readAnswer(t); resp.StatusCode != 200 {
		t.Fatalf("a plain GET: %d %q", resp.StatusCode, body)
	}
	if n := be.stats(t).Requests - before; n != 1 {
		t.Errorf("the backend received %d requests, want 1 (none of the refused ones, the plain GET)", n)
	}
}

// TestEndToEndBackendCannotForgePollbalHeaders: X-Pollbal-* headers a backend sets, in any
// case, never reach the client; pollbal's own X-Pollbal-Backend and X-Pollbal-Pool do.
func TestEndToEndBackendCannotForgePollbalHeaders(t *testing.T) {
	addr := scriptedBackend(t, func(c net.Conn, req *http.Request) bool {
		_, _ = io.Copy(io.Discard, req.Body)
		_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Pollbal-Reason: pool_exhausted\r\nx-pollbal-backend: someone-else\r\n"+
			"X-POLLBAL-POOL: pool-other\r\nX-Pollbal-Extra: 1\r\nX-Own: kept\r\nContent-Length: 2\r\n\r\nok")
		return err == nil
	})
	pb := startOver(t, "{}", addr)
	resp, body := dialProxy(t, pb, "GET / HTTP/1.1\r\nHost: shop.test\r\n\r\n").readAnswer(t)
	if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Own") != "kept" {
		t.Fatalf("answer %d %v %q, want the backend's 200 \"ok\"", resp.StatusCode, resp.Header, body)
	}
	want := http.Header{"X-Pollbal-Backend": {"web-1"}, "X-Pollbal-Pool": {"default"}}
	for k, v := range resp.Header {
		if strings.HasPrefix(k, "X-Pollbal-") && (len(v) != 1 || want.Get(k) != v[0]) {
			t.Errorf("the client got %s: %q", k, v)
		}
	}
	for k := range want {
		if resp.Header.Get(k) != want.Get(k) {
			t.Errorf("the client got %s: %q, want %q", k, resp.Header.Get(k), want.Get(k))
		}
	}
}
