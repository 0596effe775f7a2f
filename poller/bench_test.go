package poller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// benchServersEnv makes the test binary a child process that serves /pool on that many
// listeners instead of running tests, so the benchmark measures the poller alone.
const benchServersEnv = "POLLER_BENCH_SERVERS"

func TestMain(m *testing.M) {
	if n := os.Getenv(benchServersEnv); n != "" {
		os.Exit(serveBackends(n))
	}
	os.Exit(m.Run())
}

// serveBackends opens n listeners on 127.0.0.1, prints their addresses, one a line, then
// "ready", and serves until its stdin closes (the parent is gone or done).
func serveBackends(count string) int {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a positive number\n", benchServersEnv, count)
		return 2
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("web serving v1\n")
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
	}
	out := bufio.NewWriter(os.Stdout)
	for range n {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintf(os.Stderr, "listen: %v\n", err)
			return 1
		}
		go func() { _ = srv.Serve(ln) }()
		fmt.Fprintln(out, ln.Addr().String())
	}
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startBackendProcess re-executes the test binary as the backends' process and returns their
// addresses. The child dies with the benchmark: its stdin closes at cleanup, it is killed if
// still running then, and gets SIGKILL if this process dies first.
func startBackendProcess(b *testing.B, n int) []string {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	stdin, feed, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	p := testproc.Start(b, "backends", testproc.Options{
		Env: append(os.Environ(), fmt.Sprintf("%s=%d", benchServersEnv, n)), Stdin: stdin,
	}, exe, "-test.run=^$")
	_ = stdin.Close() // the child holds its own copy
	b.Cleanup(func() { _ = feed.Close() })
	p.WaitLine(b, time.Minute, "ready")
	addrs := strings.Split(strings.TrimSuffix(p.Stdout(), "ready\n"), "\n")
	addrs = addrs[:len(addrs)-1] // the empty string after the last address's newline
	if len(addrs) != n {
		b.Fatalf("backend process gave %d addresses, want %d (%v)", len(addrs), n, p.Stdout())
	}
	return addrs
}

// countingSink counts results and signals rounds.
type countingSink struct {
	checks   atomic.Int64
	notReady atomic.Int64
	rounds   chan time.Time
}

func (s *countingSink) Observe(r Result) {
	s.checks.Add(1)
	if !r.Ready {
		s.notReady.Add(1)
	}
}

func (s *countingSink) ConfirmAfter(Result) time.Duration { return 0 }

func (s *countingSink) RoundDone(at time.Time) {
	select {
	case s.rounds <- at:
	default:
	}
}

// BenchmarkPoller2000 runs one Poller checking 2,000 backends (in a child process) at a 1 s
// interval for about 10 s per iteration and reports the poller's CPU use, resident memory per
// backend and checks per second. Run it with -benchtime=1x -count=1: resident memory is
// measured as a difference, and a process that already ran the poller keeps some of the memory.
func BenchmarkPoller2000(b *testing.B) {
	const (
		n      = 2000
		warmUp = 2 * time.Second
		window = 10 * time.Second
	)
	addrs := startBackendProcess(b, n)
	targets := make([]Target, n)
	for i, a := range addrs {
		targets[i] = Target{ID: fmt.Sprintf("web-%04d", i), Address: a}
	}
	settings := configs.Poll{Interval: time.Second, Timeout: 800 * time.Millisecond, Rise: 1, Fall: 1,
		MaxBackoff: 5 * time.Second, MaxBody: 4096}
	var cores, kib, rate float64
	for range b.N {
		debug.FreeOSMemory()
		rss0 := vmRSS(b)
		sink := &countingSink{rounds: make(chan time.Time, 64)}
		p, err := New(Options{Site: "bench", Version: "bench", Settings: settings, Targets: targets, Sink: sink})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		select {
		case <-sink.rounds:
		case <-time.After(warmUp + 5*time.Second):
			b.Fatal("no first round")
		}
		<-time.After(warmUp)

		cpu0, checks0, notReady0, wall0 := cpuTime(b), sink.checks.Load(), sink.notReady.Load(), time.Now()
		<-time.After(window)
		cpu1, checks1, notReady1, wall := cpuTime(b), sink.checks.Load(), sink.notReady.Load(), time.Since(wall0)
		rss1 := vmRSS(b)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.Logf("rss %d KiB -> %d KiB; heap in use %d KiB, stacks %d KiB, goroutines %d, GCs %d",
			rss0, rss1, ms.HeapInuse>>10, ms.StackInuse>>10, runtime.NumGoroutine(), ms.NumGC)

		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if bad := notReady1 - notReady0; bad > 0 {
			b.Errorf("%d not-ready results during the window", bad)
		}
		cores += (cpu1 - cpu0).Seconds() / wall.Seconds()
		kib += float64(rss1-rss0) / n
		rate += float64(checks1-checks0) / wall.Seconds()
	}
	b.ReportMetric(cores/float64(b.N), "cores")
	b.ReportMetric(kib/float64(b.N), "KiB/backend")
	b.ReportMetric(rate/float64(b.N), "checks/s")
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmRSS is this process's resident set in KiB.
func vmRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
