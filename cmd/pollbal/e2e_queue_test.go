package main

// End-to-end: the bounded queue (proxy.queue_timeout) turns a burst above the pool's capacity
// into waiting instead of 503s, while no backend ever holds more requests than its capacity.

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// startQueueSetup starts n example backends that each enforce capacity themselves (-capacity,
// refusing with X-Pool-Full past it) and answer after delay, and pollbal in front of them with
// the same capacity and proxy.queue_timeout.
func startQueueSetup(t *testing.T, n, capacity int, delay, queueTimeout time.Duration, maxQueue int) (*instance, []*backend) {
	t.Helper()
	var bes []*backend
	var lines strings.Builder
	for i := 0; i < n; i++ {
		be := startBackend(t, fmt.Sprintf("web-%d", i+1), "127.0.0.1:0", "web serving v1\n",
			"-capacity", fmt.Sprint(capacity), "-delay", delay.String())
		bes = append(bes, be)
		fmt.Fprintf(&lines, "  - {id: %s, address: %s, capacity: %d}\n", be.id, be.addr, capacity)
	}
	pb := startPollbal(t, fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
proxy: {queue_timeout: %s, max_queue: %d}
services: {web: {warning_threshold: 1}}
apps:
  - {name: www, hosts: ["*"]}
backends:
%s`, queueTimeout, maxQueue, lines.String()))
	testproc.WaitFor(t, 10*time.Second, "backends ready", func() bool {
		st := pb.state(t)
		for _, be := range bes {
			if ready, _, _, _ := st.backend(be.id); !ready {
				return false
			}
		}
		return true
	})
	return pb, bes
}

// doAsync sends one request in the background; its answer arrives on the returned channel.
func doAsync(t *testing.T, c *http.Client, url, host string) <-chan answer {
	t.Helper()
	done := make(chan answer, 1)
	go func() {
		a, err := do(t, c, url, host)
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	return done
}

// holdSlot sends a request for /hold, which be keeps until released, and returns once be holds
// it: be's only slot is taken. The held request's answer arrives on the returned channel.
func holdSlot(t *testing.T, c *http.Client, url string, be *backend) <-chan answer {
	t.Helper()
	held := doAsync(t, c, url+"hold", "www.test")
	testproc.WaitFor(t, 5*time.Second, "the slot held", func() bool { return be.stats(t).InFlight == 1 })
	return held
}

// releaseHeld lets be answer the request it holds and checks that it was answered 200.
func releaseHeld(t *testing.T, be *backend, held <-chan answer) {
	t.Helper()
	resp, err := http.Post("http://"+be.addr+"/_backend/release", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-held; h.code != http.StatusOK {
		t.Errorf("held request: %d", h.code)
	}
}

// TestEndToEndQueueBurst: 4× the pool's capacity in concurrent clients for 3 seconds with
// queue_timeout 2s: every request is served, and no backend's peak exceeds its capacity.
func TestEndToEndQueueBurst(t *testing.T) {
	const (
		backends = 2
		capacity = 4
		clients  = 4 * backends * capacity
		burst    = 3 * time.Second
	)
	pb, bes := startQueueSetup(t, backends, capacity, 20*time.Millisecond, 2*time.Second, 1000)
	c := loadClient(clients)
	url := "http://" + pb.listen + "/"
	var served, failed atomic.Int64
	var mu sync.Mutex
	failures := map[string]int{}
	end := time.Now().Add(burst)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				a, err := do(t, c, url, "www.test")
				switch {
				case err != nil:
					failed.Add(1)
					mu.Lock()
					failures[err.Error()]++
					mu.Unlock()
				case a.code != http.StatusOK:
					failed.Add(1)
					mu.Lock()
					failures[fmt.Sprintf("%d %s", a.code, a.reason)]++
					mu.Unlock()
				default:
					served.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d clients against %d slots for %v: %d served, %d failed", clients, backends*capacity, burst, served.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed, want 0: %v", failed.Load(), failures)
	}
	if served.Load() < clients {
		t.Errorf("only %d requests served", served.Load())
	}
	var total int64
	for _, be := range bes {
		s := be.stats(t)
		t.Logf("%s: requests %d, peak in flight %d, load peak %d, refused %d", be.id, s.Requests, s.PeakInFlight, s.LoadPeak, s.Refused)
		if s.PeakInFlight > capacity || s.LoadPeak > capacity {
			t.Errorf("%s peaked at %d in flight (load peak %d), capacity %d", be.id, s.PeakInFlight, s.LoadPeak, capacity)
		}
		if s.Refused != 0 {
			t.Errorf("%s refused %d requests as full", be.id, s.Refused)
		}
		total += s.Requests
	}
	if total != served.Load() {
		t.Errorf("backends counted %d requests, clients got %d answers", total, served.Load())
	}
	text := pb.metrics(t)
	for _, want := range []string{`pollbal_queue_length{pool="default",service="web"} 0`, `pollbal_queue_wait_seconds_count{pool="default"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestEndToEndQueueTimeoutAndFull: with every slot held, a queued request is answered
// 503 queue_timeout after queue_timeout, and one past max_queue 503 queue_full at once, both
// with Retry-After: 1.
func TestEndToEndQueueTimeoutAndFull(t *testing.T) {
	pb, bes := startQueueSetup(t, 1, 1, 0, 700*time.Millisecond, 1)
	be := bes[0]
	c := loadClient(4)
	url := "http://" + pb.listen + "/"
	held := holdSlot(t, c, url, be)
	began := time.Now()
	queued := doAsync(t, c, url, "www.test")
	testproc.WaitFor(t, 5*time.Second, "one request queued", func() bool {
		return strings.Contains(pb.metrics(t), `pollbal_queue_length{pool="default",service="web"} 1`)
	})
	full, err := do(t, c, url, "www.test")
	if err != nil {
		t.Fatal(err)
	}
	if full.code != http.StatusServiceUnavailable || full.reason != "queue_full" || full.retryAfter != "1" {
		t.Errorf("past max_queue: %d %q Retry-After %q, want 503 queue_full 1", full.code, full.reason, full.retryAfter)
	}
	a := <-queued
	if a.code != http.StatusServiceUnavailable || a.reason != "queue_timeout" || a.retryAfter != "1" {
		t.Errorf("queued: %d %q Retry-After %q, want 503 queue_timeout 1", a.code, a.reason, a.retryAfter)
	}
	if d := time.Since(began); d < 700*time.Millisecond {
		t.Errorf("queue_timeout answered after %v, before 700ms", d)
	}
	releaseHeld(t, be, held)
	// pollbal's own answers, counted by reason; the backend's 200 is not one.
	text := pb.metrics(t)
	metrictest.ExpectText(t, text, map[string]float64{
		`pollbal_responses_total{reason="queue_full"}`:     1,
		`pollbal_responses_total{reason="queue_timeout"}`:  1,
		`pollbal_responses_total{reason="pool_exhausted"}`: 0,
		`pollbal_requests_total{app="www",code="503"}`:     2,
	})
}

// TestEndToEndQueueClientLeaves: a queued request whose client closes its connection leaves
// the queue at once, long before queue_timeout, and takes no slot afterwards.
func TestEndToEndQueueClientLeaves(t *testing.T) {
	pb, bes := startQueueSetup(t, 1, 1, 0, 30*time.Second, 10)
	be := bes[0]
	c := loadClient(2)
	url := "http://" + pb.listen + "/"
	held := holdSlot(t, c, url, be)
	conn, err := net.Dial("tcp", pb.listen)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: www.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	queued := `pollbal_queue_length{pool="default",service="web"} 1`
	testproc.WaitFor(t, 5*time.Second, "one request queued", func() bool { return strings.Contains(pb.metrics(t), queued) })
	conn.Close()
	left := testproc.WaitFor(t, 5*time.Second, "the queue empty", func() bool {
		return strings.Contains(pb.metrics(t), `pollbal_queue_length{pool="default",service="web"} 0`)
	})
	if left > 2*time.Second {
		t.Errorf("the waiter left %v after its client, want well under queue_timeout", left)
	}
	releaseHeld(t, be, held)
	testproc.WaitFor(t, 5*time.Second, "the slot free", func() bool { return be.stats(t).InFlight == 0 })
	if r := be.stats(t).Requests; r != 1 {
		t.Errorf("backend served %d requests, want 1 (the gone waiter must not be forwarded)", r)
	}
	// The waiter is a client gone, not a request answered 400 (as it used to be counted).
	gone := `pollbal_client_gone_total{stage="queued"}`
	testproc.WaitFor(t, 5*time.Second, gone+" 1", func() bool {
		n, _ := metrictest.TextValue(t, pb.metrics(t), gone)
		return n == 1
	})
	text := pb.metrics(t)
	metrictest.ExpectText(t, text, map[string]float64{
		`pollbal_requests_total{app="www",code="200"}`:  1,
		`pollbal_responses_total{reason="bad_request"}`: 0,
	}, `pollbal_requests_total{app="www",code="400"}`)
}
