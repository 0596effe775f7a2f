package poller

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/testproc"
	"pollbal/protocol"
)

// waitLimit bounds every wait for an event in these tests.
const waitLimit = 5 * time.Second

// step is one scripted /pool answer.
type step struct {
	status  int    // 0 = 200
	body    string //
	chunked bool   // send the body with chunked encoding (no Content-Length)
	hold    bool   // do not answer until the backend is released (or the client gives up)
	load    string // X-Pool-Load value; "" sends none
}

// hit is one request a backend received.
type hit struct {
	at     time.Time
	method string
	path   string
	host   string
	header http.Header
}

// backend is a /pool server on 127.0.0.1 that answers a script of steps; the last step repeats.
type backend struct {
	addr    string
	hits    chan hit
	count   atomic.Int64 // requests received
	conns   atomic.Int64 // connections accepted
	release chan struct{}

	mu    sync.Mutex
	steps []step
	next  int
}

func newBackend(t *testing.T, steps ...step) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{addr: ln.Addr().String(), hits: make(chan hit, 4096), release: make(chan struct{}), steps: steps}
	srv := &http.Server{
		Handler: http.HandlerFunc(b.serve),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				b.conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		b.unblock()
		_ = srv.Close()
	})
	return b
}

// script replaces the answers from the next request on.
func (b *backend) script(steps ...step) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steps, b.next = steps, 0
}

func (b *backend) unblock() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *backend) serve(w http.ResponseWriter, r *http.Request) {
	b.count.Add(1)
	select {
	case b.hits <- hit{at: time.Now(), method: r.Method, path: r.URL.Path, host: r.Host, header: r.Header.Clone()}:
	default:
	}
	b.mu.Lock()
	s := step{body: ""}
	if len(b.steps) > 0 {
		s = b.steps[min(b.next, len(b.steps)-1)]
		b.next++
	}
	b.mu.Unlock()
	if s.hold {
		select {
		case <-b.release:
		case <-r.Context().Done():
			return
		}
	}
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if s.chunked {
		w.WriteHeader(s.status)
		half := len(s.body) / 2
		_, _ = w.Write([]byte(s.body[:half]))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte(s.body[half:]))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	if s.load != "" {
		w.Header().Set(protocol.HeaderLoad, s.load)
	}
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(s.body))
}

// nextHit returns the next request the backend receives.
func (b *backend) nextHit(t *testing.T) hit {
	t.Helper()
	select {
	case h := <-b.hits:
		return h
	case <-time.After(waitLimit):
		t.Fatalf("backend %s: no request within %v", b.addr, waitLimit)
		return hit{}
	}
}

// fakeSink records what the poller publishes and signals on channels.
type fakeSink struct {
	results chan Result
	rounds  chan time.Time
}

func newFakeSink() *fakeSink {
	return &fakeSink{results: make(chan Result, 8192), rounds: make(chan time.Time, 1024)}
}

func (s *fakeSink) Observe(r Result) {
	select {
	case s.results <- r:
	default:
		panic("fakeSink: results buffer full")
	}
}

// ConfirmAfter asks for no confirmation check.
func (s *fakeSink) ConfirmAfter(Result) time.Duration { return 0 }

func (s *fakeSink) RoundDone(at time.Time) {
	select {
	case s.rounds <- at:
	default:
	}
}

// waitResult returns the first Result for which match is true.
func (s *fakeSink) waitResult(t *testing.T, what string, match func(Result) bool) Result {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		select {
		case r := <-s.results:
			if match(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no result %s within %v", what, waitLimit)
			return Result{}
		}
	}
}

// results collects the next n Results of target id.
func (s *fakeSink) collect(t *testing.T, id string, n int) []Result {
	t.Helper()
	var out []Result
	for len(out) < n {
		out = append(out, s.waitResult(t, "for "+id, func(r Result) bool { return r.ID == id }))
	}
	return out
}

// fastSettings are settings for tests whose outcome a timed-out check does not change: checks
// every 100 ms, with a 95 ms timeout that a loaded 2-core machine under -race reaches now and then
// (a check read late). A test whose outcome a timed-out check would change (a check's reason,
// readiness or connection compared with the backend's answer) uses scriptedSettings.
func fastSettings() configs.Poll {
	return configs.Poll{Interval: 100 * time.Millisecond, Timeout: 95 * time.Millisecond, Rise: 1, Fall: 1,
		MaxBackoff: 200 * time.Millisecond, MaxBody: 4096}
}

// scriptedSettings are fastSettings for tests that compare checks' outcomes with the backend's
// scripted answers: a timeout that a late read on a loaded 2-core machine does not reach (a
// timed-out check would replace the scripted answer), and a backoff equal to the interval so
// that failures do not stretch the script.
func scriptedSettings() configs.Poll {
	s := fastSettings()
	s.Interval, s.Timeout, s.MaxBackoff = 300*time.Millisecond, 290*time.Millisecond, 300*time.Millisecond
	return s
}

// newPoller builds a poller from o, with site "s" and version "v" unless o names them.
func newPoller(t *testing.T, o Options) *Poller {
	t.Helper()
	if o.Site == "" {
		o.Site = "s"
	}
	if o.Version == "" {
		o.Version = "v"
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs p until the test ends; the cleanup stops it, waits for Run and checks that no
// goroutine of the poller is left.
func start(t *testing.T, p *Poller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return within %v", waitLimit)
			}
			// A goroutine that has called wg.Done may still be on its way out: poll briefly.
			leaked := pollerGoroutines()
			for deadline := time.Now().Add(time.Second); leaked != "" && time.Now().Before(deadline); {
				runtime.Gosched()
				leaked = pollerGoroutines()
			}
			if leaked != "" {
				t.Errorf("goroutines left after Run returned:\n%s", leaked)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// pollerGoroutines returns the stacks of goroutines running this package's code.
func pollerGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "poller.(*Poller).") && !strings.Contains(g, "poller.pollerGoroutines") {
			leaked = append(leaked, g)
		}
	}
	return strings.Join(leaked, "\n\n")
}

func newTestLogger(buf *testproc.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
