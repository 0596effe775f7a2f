package main

// End-to-end: what a hostile or careless client does cannot stop the real binary — descriptor
// exhaustion, slowloris, bare-LF requests, stalled bodies, idle keep-alives, and SIGTERM with
// hundreds of half-sent requests open.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// startLimitsSetup starts one example backend and pollbal with the given proxy: flow mapping,
// and waits until the backend is ready.
func startLimitsSetup(t *testing.T, proxyKeys string) *instance {
	t.Helper()
	pb, _ := startSingle(t, proxyKeys, "")
	return pb
}

// rawConn is a client connection to pollbal's proxy listener that writes raw bytes.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialProxy(t *testing.T, pb *instance, sent string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", pb.listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if sent != "" {
		if _, err := c.Write([]byte(sent)); err != nil {
			t.Fatal(err)
		}
	}
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// readAnswer reads one response (within 10 s) and its body.
func (rc *rawConn) readAnswer(t *testing.T) (*http.Response, string) {
	t.Helper()
	if err := rc.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// readClosed reads until pollbal closes the connection (within 10 s) and returns what came.
func (rc *rawConn) readClosed(t *testing.T) string {
	t.Helper()
	if err := rc.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc.br)
	if err != nil {
		t.Fatalf("connection not closed by pollbal: %v (read %q)", err, b)
	}
	return string(b)
}

// setFileLimit sets the soft and hard RLIMIT_NOFILE of process pid (prlimit(2)).
func setFileLimit(t *testing.T, pid int, n uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: n, Max: n}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit %d: %v", pid, errno)
	}
}

func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// Regression: 1,100 idle connections under a 1,024-descriptor limit made pollbal exit
// (accept4: too many open files) two seconds later.
func TestEndToEndSurvivesDescriptorExhaustion(t *testing.T) {
	// Long timeouts: the idle connections must hold their descriptors for the whole test.
	pb := startLimitsSetup(t, "{header_timeout: 5m, idle_timeout: 5m}")
	pid := pb.Pid()
	limit := openFiles(t, pid) + 30
	setFileLimit(t, pid, uint64(limit))
	conns := make([]net.Conn, 0, limit+50)
	for range limit + 50 {
		c, err := net.Dial("tcp", pb.listen)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	const failed = "accepting client connections failed"
	testproc.WaitFor(t, 10*time.Second, "accept failures logged", func() bool { return strings.Contains(pb.Output(), failed) })
	// Failures are logged at most once a second: a second line means pollbal kept going through
	// at least a second of failing accepts.
	testproc.WaitFor(t, 10*time.Second, "accept failures logged twice", func() bool { return strings.Count(pb.Output(), failed) >= 2 })
	select {
	case <-pb.Done():
		t.Fatalf("pollbal exited under descriptor exhaustion: %v", pb.Err())
	default:
	}
	if !strings.Contains(pb.Output(), "too many open files") {
		t.Errorf("the logged failure does not name the cause:\n%s", pb.Output())
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	c := loadClient(1)
	took := testproc.WaitFor(t, 20*time.Second, "pollbal to serve again", func() bool {
		a, err := do(t, c, "http://"+pb.listen+"/", "www.test")
		return err == nil && a.code == 200
	})
	t.Logf("serving again %s after the idle connections closed", took.Round(time.Millisecond))
	if n, _ := metrictest.TextValue(t, pb.metrics(t), "pollbal_accept_errors_total"); n < 1 {
		t.Errorf("pollbal_accept_errors_total = %v, want > 0", n)
	}
}

// Slowloris connections are cut at header_timeout with a 408 while complete requests on other
// connections are served (how fast is the harness's figure, not this test's); a request with
// bare-LF line endings gets the 408 too instead of hanging.
func TestEndToEndSlowlorisCutAtHeaderTimeout(t *testing.T) {
	const limit = time.Second
	pb := startLimitsSetup(t, "{header_timeout: 1s}")
	const slow = 100
	start := time.Now()
	var wg sync.WaitGroup
	type cut struct {
		after  time.Duration
		code   int
		reason string
	}
	cuts := make(chan cut, slow+1)
	for i := range slow {
		rc := dialProxy(t, pb, "GET / HTTP/1.1\r\nHost: www.test\r\n")
		wg.Add(2)
		go func() { // trickle a header line every 100 ms, as slowloris does
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for range tick.C {
				if _, err := fmt.Fprintf(rc.c, "X-Slow-%d: 1\r\n", i); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer rc.c.Close() // ends the trickle too
			resp, err := http.ReadResponse(rc.br, nil)
			if err != nil {
				cuts <- cut{after: time.Since(start)}
				return
			}
			resp.Body.Close()
			cuts <- cut{after: time.Since(start), code: resp.StatusCode, reason: resp.Header.Get("X-Pollbal-Reason")}
		}()
	}
	bareLF := dialProxy(t, pb, "GET / HTTP/1.1\nHost: www.test\n\n")

	// Meanwhile, complete requests on a kept-alive connection.
	c := loadClient(1)
	var worst time.Duration
	var served int
	for time.Since(start) < limit+500*time.Millisecond {
		t0 := time.Now()
		a, err := do(t, c, "http://"+pb.listen+"/", "www.test")
		if err != nil || a.code != 200 {
			t.Fatalf("complete request during slowloris: %v %v", a, err)
		}
		worst = max(worst, time.Since(t0))
		served++
	}
	resp, body := bareLF.readAnswer(t)
	if resp.StatusCode != 408 || resp.Header.Get("X-Pollbal-Reason") != "request_timeout" {
		t.Errorf("bare-LF request answered %d %q (%s), want 408 request_timeout", resp.StatusCode, body, resp.Header.Get("X-Pollbal-Reason"))
	}
	wg.Wait()
	close(cuts)
	var first, last time.Duration = time.Hour, 0
	for k := range cuts {
		if k.code != 408 || k.reason != "request_timeout" {
			t.Errorf("slowloris connection: %d %q after %s, want 408 request_timeout", k.code, k.reason, k.after)
		}
		first, last = min(first, k.after), max(last, k.after)
	}
	t.Logf("%d slowloris connections cut between %s and %s; %d complete requests meanwhile, slowest %s",
		slow, first.Round(time.Millisecond), last.Round(time.Millisecond), served, worst.Round(time.Millisecond))
	if first < limit || last > limit+1500*time.Millisecond {
		t.Errorf("slowloris connections cut between %s and %s, want between %s and %s", first, last, limit, limit+1500*time.Millisecond)
	}
	if n, _ := metrictest.TextValue(t, pb.metrics(t), `pollbal_client_timeouts_total{kind="header"}`); n < slow+1 {
		t.Errorf(`pollbal_client_timeouts_total{kind="header"} = %v, want >= %d`, n, slow+1)
	}
}

// A kept-alive connection is closed after idle_timeout; a client that stops sending its body is
// cut at client_timeout (the backend never sees the request).
func TestEndToEndIdleAndClientTimeouts(t *testing.T) {
	const limit = time.Second
	pb := startLimitsSetup(t, "{idle_timeout: 1s, client_timeout: 1s}")

	idle := dialProxy(t, pb, "GET / HTTP/1.1\r\nHost: www.test\r\n\r\n")
	if resp, _ := idle.readAnswer(t); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("keep-alive request answered %d close=%v", resp.StatusCode, resp.Close)
	}
	served := time.Now()
	stalled := dialProxy(t, pb, "POST / HTTP/1.1\r\nHost: www.test\r\nContent-Length: 1000\r\n\r\n0123456789")
	sent := time.Now()

	if rest := idle.readClosed(t); rest != "" {
		t.Errorf("idle connection got %q before the close", rest)
	}
	idleAfter := time.Since(served)
	if rest := stalled.readClosed(t); rest != "" {
		t.Errorf("stalled client got %q before the close", rest)
	}
	stalledAfter := time.Since(sent)
	t.Logf("idle connection closed after %s, stalled body cut after %s", idleAfter.Round(time.Millisecond), stalledAfter.Round(time.Millisecond))
	for name, d := range map[string]time.Duration{"idle connection": idleAfter, "stalled body": stalledAfter} {
		if d < limit || d > limit+1500*time.Millisecond {
			t.Errorf("%s closed after %s, want between %s and %s", name, d, limit, limit+1500*time.Millisecond)
		}
	}
	text := pb.metrics(t)
	for _, kind := range []string{"idle", "client"} {
		if n, _ := metrictest.TextValue(t, text, `pollbal_client_timeouts_total{kind="`+kind+`"}`); n != 1 {
			t.Errorf("pollbal_client_timeouts_total{kind=%q} = %v, want 1", kind, n)
		}
	}
}

// Regression: with 500 half-sent requests open, SIGTERM took 31.7 s to exit.
func TestEndToEndShutdownWithHalfOpenConnections(t *testing.T) {
	// A -race binary sleeps 1 s at exit (for late reports) unless told not to; the figure
	// measured here is pollbal's own.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	pb := startLimitsSetup(t, "{header_timeout: 5m}")
	const half = 500
	for range half {
		dialProxy(t, pb, "GET / HTTP/1.1\r\nHost: www.test\r\nX-Half: ")
	}
	testproc.WaitFor(t, 10*time.Second, "pollbal to hold every connection", func() bool {
		n, _ := metrictest.TextValue(t, pb.metrics(t), "pollbal_client_connections")
		return n >= half
	})
	start := time.Now()
	pb.Signal(t, syscall.SIGTERM)
	code := pb.ExitCode(t, 10*time.Second)
	took := time.Since(start)
	t.Logf("SIGTERM with %d half-open connections: exit %d after %s", half, code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if took > time.Second {
		t.Errorf("exit took %s, want within 1s", took)
	}
}

// pollbal raises its soft descriptor limit to the hard one at start, and warns when even that
// cannot hold max_connections.
func TestEndToEndFileLimitWarning(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	over := lim.Max + 1000 // beyond the hard limit pollbal inherits
	// pollbal starts with a soft limit below the hard one (restored here once it runs).
	low := syscall.Rlimit{Cur: min(1024, lim.Max), Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	pb := startLimitsSetup(t, fmt.Sprintf("{max_connections: %d}", over))
	restore()
	want := fmt.Sprintf("need=%d", over+256+2+64) // admin.max_connections's default counts too
	testproc.WaitFor(t, 5*time.Second, "the file limit warning", func() bool {
		return strings.Contains(pb.Output(), "open file limit below") && strings.Contains(pb.Output(), want)
	})
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pb.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[0] == "Max" && f[1] == "open" && f[3] != f[4] {
			t.Errorf("soft limit not raised to the hard one: %s", line)
		}
	}
}
