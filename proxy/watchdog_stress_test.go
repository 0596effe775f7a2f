package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
	"pollbal/proxy/clientconn"
)

// TestWatchdogStress runs many concurrent forwards through a real socket while backends answer
// at once, late, never (cut by the watchdog at the backend timeout), as a slow stream or as a
// large body, and clients stay, leave at once, leave at a random moment, leave after the status
// line or half-close; with fewer slots than clients, some requests queue and some leave while
// queued. Afterwards every lease must have come back exactly once: nothing left in flight, no
// release that found nothing to return (a lease released twice), no queued request, and no
// backend connection still marked busy by the watchdog.
func TestWatchdogStress(t *testing.T) {
	const (
		workers  = 12
		requests = 20 // per worker
		timeout  = 200 * time.Millisecond
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	release := make(chan struct{})
	big := bytes.Repeat([]byte("x"), 256<<10)
	wait := func(d time.Duration) bool { // false when the test ends first
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return true
		case <-release:
			return false
		}
	}
	handler := func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/fast":
			ctx.SetBodyString("ok")
		case "/slow": // answers after ms milliseconds: cut by the watchdog past the timeout
			ms, _ := strconv.Atoi(string(ctx.QueryArgs().Peek("ms")))
			if wait(time.Duration(ms) * time.Millisecond) {
				ctx.SetBodyString("late")
			}
		case "/stall": // never answers while the test runs
			<-release
		case "/trickle": // a chunked body, a piece every 5 ms: never idle for the timeout
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				for range 10 {
					if _, err := w.WriteString("piece\n"); err != nil || w.Flush() != nil || !wait(5*time.Millisecond) {
						return
					}
				}
			})
		case "/big":
			ctx.SetBody(big)
		}
	}
	b1, b2 := startBackend(t, handler), startBackend(t, handler)
	t.Cleanup(func() { close(release) }) // before the backends shut down
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1", Address: b1.addr, Capacity: 4}, {ID: "b2", Address: b2.addr, Capacity: 4}}, tieBreakID)

	cfg.Proxy.BackendTimeout = timeout
	cfg.Proxy.QueueTimeout = time.Second
	cfg.Proxy.MaxQueue = 100
	e := newEnv(t, cfg, "b1", "b2")
	addr := e.serveTCP(t)

	paths := []string{"/fast", "/slow", "/stall", "/trickle", "/big"}
	const (
		stay = iota
		leaveAtOnce
		leaveLater
		leaveAfterStatus
		halfClose
		behaviours
	)
	var (
		mu    sync.Mutex
		codes = map[int]int{} // status codes the staying clients got
		left  int             // clients that left before the end of their response
		cut   int             // staying clients whose streamed body was cut
		wg    sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var (
				c   net.Conn
				br  *bufio.Reader
				err error
			)
			defer func() {
				if c != nil {
					_ = c.Close()
				}
			}()
			for i := range requests {
				if c == nil {
					if c, err = net.Dial("tcp4", addr); err != nil {
						t.Error(err)
						return
					}
					br = bufio.NewReader(c)
				}
				path := paths[rng.IntN(len(paths))]
				if path == "/slow" {
					path += fmt.Sprintf("?ms=%d", rng.IntN(int(2*timeout/time.Millisecond)))
				}
				// pollbal answers within the queue and backend timeouts: a hang fails here.
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: shop.test\r\n\r\n", path); err != nil {
					t.Errorf("worker %d request %d: %v", w, i, err)
					return
				}
				how := rng.IntN(behaviours)
				switch how {
				case stay:
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Errorf("worker %d request %d %s: %v", w, i, path, err)
						return
					}
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					mu.Lock()
					codes[resp.StatusCode]++
					if err != nil {
						// A streamed body the watchdog cut: the backend paused for the timeout
						// on a machine loaded enough to starve it. Not what this test checks.
						cut++
					}
					mu.Unlock()
					if err != nil || resp.Close {
						_ = c.Close()
						c = nil
					}
					continue
				case leaveLater:
					timer := time.NewTimer(time.Duration(rng.Int64N(int64(2 * timeout))))
					<-timer.C
				case leaveAfterStatus:
					_, _ = br.ReadString('\n')
				case halfClose:
					_ = c.(*net.TCPConn).CloseWrite()
					// Until pollbal closes the connection (or resets it): it must not keep it.
					if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
						t.Errorf("worker %d request %d %s: half-closed, pollbal did not close: %v", w, i, path, err)
					}
				}
				mu.Lock()
				left++
				mu.Unlock()
				_ = c.Close()
				c = nil
			}
		}()
	}
	wg.Wait()
	t.Logf("staying clients got %v (%d bodies cut); %d clients left early", codes, cut, left)
	for code := range codes {
		if code != 200 && code != 503 && code != 504 {
			t.Errorf("a staying client got %d (want 200, 503 queue timeout, or 504 backend timeout)", code)
		}
	}

	busy := func() int {
		_, n := e.p.watch.Watched()
		return n
	}
	ids := []string{"b1", "b2"}
	testproc.WaitFor(t, 10*time.Second, "every lease back, the queue empty and no busy backend connection", func() bool {
		for _, id := range ids {
			if backendOf(t, e.bal, id).InFlight() != 0 {
				return false
			}
		}
		return e.bal.QueueLength("default") == 0 && busy() == 0
	})
	for _, id := range ids {
		b := backendOf(t, e.bal, id)
		if n := b.InFlight(); n != 0 {
			t.Errorf("%s: %d in flight after every client is done, want 0", id, n)
		}
		if n := b.StrayReleases(); n != 0 {
			t.Errorf("%s: %d releases found no lease in flight (a lease released twice), want 0", id, n)
		}
	}
}

// TestClientGone checks the peek that tells the watchdog a client went away: a client
// connection closed by its peer is gone, an open one is not.
func TestClientGone(t *testing.T) {
	gone, goneClient := tcpPair(t)
	here, _ := tcpPair(t)
	_ = goneClient.Close()
	testproc.WaitFor(t, 5*time.Second, "the closed client to look gone", func() bool { return clientconn.Gone(gone) })
	if clientconn.Gone(here) {
		t.Error("an open client connection looks gone")
	}
}

// tcpPair returns both ends of a TCP connection on 127.0.0.1.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}
