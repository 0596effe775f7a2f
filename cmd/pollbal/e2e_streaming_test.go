package main

// End-to-end: bodies stream through the real binary with bounded memory both ways; the lease
// of a streamed response is held until its last byte and released within a second when the
// client goes away; a backend's unexpected 101 is answered 502.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testproc"
)

const (
	mib         = 1 << 20
	rssLimit    = 256 * mib // peak RSS allowed under heavy streaming
	rssFallback = 64 * mib  // RSS must come back within this of its idle size
)

// streamSetup is one example backend behind pollbal, with the given proxy: keys (a flow
// mapping; "{}" for the defaults).
type streamSetup struct {
	be *backend
	pb *instance
}

func startStreamSetup(t *testing.T, proxyKeys string) *streamSetup {
	t.Helper()
	pb, be := startSingle(t, proxyKeys, ", capacity: 100")
	return &streamSetup{be: be, pb: pb}
}

// inFlight is web-1's in_flight in /api/state.
func (s *streamSetup) inFlight(t *testing.T) int {
	t.Helper()
	return s.pb.inFlight(t, "web-1")
}

// streams reads the example backend's streaming counters.
func (s *streamSetup) streams(t *testing.T) api.Streams {
	t.Helper()
	var st api.Streams
	getJSON(t, "http://"+s.be.addr+"/_backend/streams", &st)
	return st
}

// memory reads pollbal's resident set size and its peak (VmRSS, VmHWM) from /proc.
func (s *streamSetup) memory(t *testing.T) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pb.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak
}

// sampler records pollbal's largest VmRSS seen every 20 ms until stopped.
type sampler struct {
	stop chan struct{}
	done chan int64
}

func (s *streamSetup) sample(t *testing.T) *sampler {
	sm := &sampler{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var most int64
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pb.Pid())); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						most = max(most, kb<<10)
					}
				}
			}
			select {
			case <-sm.stop:
				sm.done <- most
				return
			case <-tick.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) max() int64 {
	close(sm.stop)
	return <-sm.done
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 100, MaxIdleConnsPerHost: 100, DisableCompression: true}}
}

// TestStreamingDownloadsBoundedMemory: 40 clients download a 60 MiB body each at once; pollbal's
// peak RSS stays below 256 MiB, and its RSS comes back within 64 MiB of its idle size.
func TestStreamingDownloadsBoundedMemory(t *testing.T) {
	const clients, size = 40, 60 * mib
	s := startStreamSetup(t, "{}")
	client := newClient()
	get := func(path string) (int64, error) {
		resp, err := client.Get("http://" + s.pb.listen + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && (resp.StatusCode != 200 || resp.ContentLength != n) {
			err = fmt.Errorf("status %d, %d bytes of %d", resp.StatusCode, n, resp.ContentLength)
		}
		return n, err
	}
	if _, err := get("/blob?size=1000000"); err != nil { // warm up: connections, pools
		t.Fatal(err)
	}
	idle, _ := s.memory(t)

	sm := s.sample(t)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := get("/blob?size=" + strconv.Itoa(size))
			if err == nil && n != size {
				err = fmt.Errorf("got %d bytes, want %d", n, size)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sampled := sm.max()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, peak := s.memory(t)
	t.Logf("%d × %d MiB in %v (%.0f MiB/s through pollbal); RSS idle %d MiB, sampled max %d MiB, VmHWM %d MiB",
		clients, size/mib, elapsed.Round(time.Millisecond), float64(clients*size)/mib/elapsed.Seconds(), idle/mib, sampled/mib, peak/mib)
	if peak >= rssLimit {
		t.Errorf("peak RSS %d MiB, want below %d MiB", peak/mib, rssLimit/mib)
	}
	if n := s.streams(t).Blobs; n != clients+1 {
		t.Errorf("backend sent %d whole blobs, want %d", n, clients+1)
	}
	testproc.WaitFor(t, 5*time.Second, "in_flight 0", func() bool { return s.inFlight(t) == 0 })
	back := testproc.WaitFor(t, 60*time.Second, "RSS back within 64 MiB of idle", func() bool {
		rss, _ := s.memory(t)
		return rss <= idle+rssFallback
	})
	rss, _ := s.memory(t)
	t.Logf("RSS back to %d MiB after %v", rss/mib, back.Round(time.Millisecond))
}

// TestStreamingStalledClientsBoundedMemory: 10 clients ask for 60 MiB each and never read;
// pollbal holds a bounded amount for them, and frees their leases when they go.
func TestStreamingStalledClientsBoundedMemory(t *testing.T) {
	const clients = 10
	s := startStreamSetup(t, "{}")
	idle, _ := s.memory(t)
	sm := s.sample(t)
	conns := make([]net.Conn, 0, clients)
	for range clients {
		c, err := net.Dial("tcp", s.pb.listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET /blob?size="+strconv.Itoa(60*mib)+" HTTP/1.1\r\nHost: www\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	testproc.WaitFor(t, 10*time.Second, "10 forwards in flight", func() bool { return s.inFlight(t) == clients })
	// Let the socket buffers on both sides fill: a bounded window of samples, not a wait for an
	// event.
	window := time.NewTimer(2 * time.Second)
	<-window.C
	held := sm.max()
	t.Logf("10 stalled 60 MiB downloads: RSS idle %d MiB, max %d MiB while stalled", idle/mib, held/mib)
	if held >= rssLimit || held > idle+rssFallback {
		t.Errorf("RSS %d MiB with 10 stalled clients (idle %d MiB), want within %d MiB of idle and below %d MiB",
			held/mib, idle/mib, rssFallback/mib, rssLimit/mib)
	}
	start := time.Now()
	for _, c := range conns {
		_ = c.Close()
	}
	testproc.WaitFor(t, 5*time.Second, "in_flight 0 after the stalled clients left", func() bool { return s.inFlight(t) == 0 })
	t.Logf("leases released %v after the stalled clients closed", time.Since(start).Round(time.Millisecond))
}

// pattern is n bytes generated on demand, so a test never holds a large body itself.
type pattern struct{ left int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(b)), p.left)
	for i := range b[:n] {
		b[i] = byte('a' + i%26)
	}
	p.left -= n
	return int(n), nil
}

// TestStreamingUploadBoundedMemory: a 200 MiB upload, well over buffer_request_body, reaches
// the backend whole while pollbal's RSS stays bounded.
func TestStreamingUploadBoundedMemory(t *testing.T) {
	const size = 200 * mib
	s := startStreamSetup(t, "{max_request_body: 300000000}")
	idle, _ := s.memory(t)
	sm := s.sample(t)
	req, err := http.NewRequest("POST", "http://"+s.pb.listen+"/upload", &pattern{left: size})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	start := time.Now()
	resp, err := newClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	most := sm.max()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != fmt.Sprintf(`{"bytes":%d}`, size) {
		t.Fatalf("upload answered %d %q", resp.StatusCode, body)
	}
	if got := s.streams(t).UploadBytes; got != size {
		t.Errorf("backend counted %d bytes, want %d", got, size)
	}
	t.Logf("%d MiB upload in %v; RSS idle %d MiB, max %d MiB", size/mib, elapsed.Round(time.Millisecond), idle/mib, most/mib)
	if most >= rssLimit || most > idle+rssFallback {
		t.Errorf("RSS %d MiB during the upload (idle %d MiB), want within %d MiB of idle and below %d MiB",
			most/mib, idle/mib, rssFallback/mib, rssLimit/mib)
	}
}

// TestStreamingClientGoneEndsForward: a client that closes its connection, in the middle of a
// slow download or while the backend has not answered yet, ends the forward within a second:
// in_flight is 0 and the backend sees its connection closed.
func TestStreamingClientGoneEndsForward(t *testing.T) {
	s := startStreamSetup(t, "{}")
	tests := []struct {
		name  string
		path  string
		begun bool // the response has begun: the client reads its first bytes before leaving
	}{
		{name: "mid-download", path: "/blob?size=1000000000&chunk=65536&delay=50ms", begun: true},
		{name: "backend silent", path: "/blob?size=1000&hold=30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cancelled := s.streams(t).Cancelled
			c, err := net.Dial("tcp", s.pb.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET "+tt.path+" HTTP/1.1\r\nHost: www\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if tt.begun {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("response: %v %v", resp, err)
				}
				if _, err := io.ReadFull(resp.Body, make([]byte, 100000)); err != nil {
					t.Fatal(err)
				}
			}
			testproc.WaitFor(t, 5*time.Second, "the forward in flight", func() bool { return s.inFlight(t) == 1 })
			start := time.Now()
			_ = c.Close()
			released := testproc.WaitFor(t, 5*time.Second, "in_flight 0", func() bool { return s.inFlight(t) == 0 })
			testproc.WaitFor(t, 5*time.Second, "the backend to see its client closed", func() bool {
				return s.streams(t).Cancelled == cancelled+1
			})
			seen := time.Since(start)
			t.Logf("client closed: in_flight 0 after %v, backend saw its connection closed within %v",
				released.Round(time.Millisecond), seen.Round(time.Millisecond))
			if released > time.Second || seen > time.Second {
				t.Errorf("forward ended %v (lease) / %v (backend) after the client left, want within 1s", released, seen)
			}
		})
	}
}

// TestStreamingLeaseHeldUntilLastByte: while a slow response streams the backend's in_flight
// is 1; once the client has the last byte it is 0.
func TestStreamingLeaseHeldUntilLastByte(t *testing.T) {
	s := startStreamSetup(t, "{}")
	resp, err := newClient().Get("http://" + s.pb.listen + "/blob?size=" + strconv.Itoa(10*65536) + "&chunk=65536&delay=100ms")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 65536)); err != nil {
		t.Fatal(err)
	}
	if n := s.inFlight(t); n != 1 {
		t.Errorf("in_flight %d while the body streams, want 1", n)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != 9*65536 {
		t.Fatalf("rest of the body: %d bytes, %v", n, err)
	}
	released := testproc.WaitFor(t, 5*time.Second, "in_flight 0 after the last byte", func() bool { return s.inFlight(t) == 0 })
	t.Logf("in_flight 0 %v after the last byte arrived", released.Round(time.Millisecond))
}

// TestStreamingUnexpectedSwitch: a backend that answers 101 to a plain GET gets the client a
// 502 bad_response, not a hung connection.
func TestStreamingUnexpectedSwitch(t *testing.T) {
	s := startStreamSetup(t, "{}")
	client := newClient()
	client.Timeout = 10 * time.Second
	resp, err := client.Get("http://" + s.pb.listen + "/switch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get("X-Pollbal-Reason") != "bad_response" {
		t.Fatalf("got %d %q, want 502 bad_response", resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"))
	}
	if n := s.streams(t).Upgrades; n != 1 {
		t.Errorf("backend answered %d 101s, want 1", n)
	}
	testproc.WaitFor(t, 5*time.Second, "in_flight 0", func() bool { return s.inFlight(t) == 0 })
}
