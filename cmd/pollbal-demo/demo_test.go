package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// e2eBins are the programs an end-to-end test runs, built once per test binary.
type e2eBins struct {
	demo, pollbal, backend, script string
}

var buildOnce struct {
	sync.Once
	bins e2eBins
	err  error
	dir  string
}

// buildBins builds pollbal, the example backend and the demo itself (with -race when the
// tests run with it) into a temporary directory shared by this test binary's tests.
func buildBins(t *testing.T) e2eBins {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pollbal-demo-test-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.dir = dir
		b := e2eBins{
			demo: filepath.Join(dir, "demo"), pollbal: filepath.Join(dir, "pollbal"),
			backend: filepath.Join(dir, "backend"),
		}
		if b.script, err = filepath.Abs("../../scripts/pollbal-update.sh"); err != nil {
			buildOnce.err = err
			return
		}
		// Only the demo itself is built with -race (when the tests run with it): the programs
		// it starts are tested under -race in their own packages.
		for _, c := range []struct {
			out, pkg string
			race     bool
		}{{b.demo, ".", testproc.Race}, {b.pollbal, "../../cmd/pollbal", false}, {b.backend, "../../internal/testbackend", false}} {
			if buildOnce.err = testproc.GoBuild(c.out, c.pkg, c.race); buildOnce.err != nil {
				return
			}
		}
		buildOnce.bins = b
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.bins
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		_ = os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

// startDemo runs the built demo with args, without DEMO_ROUNDS from the caller's environment.
func startDemo(t *testing.T, b e2eBins, args ...string) *testproc.Proc {
	t.Helper()
	args = append([]string{"-pollbal", b.pollbal, "-backend", b.backend, "-update-script", b.script}, args...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DEMO_ROUNDS=") {
			env = append(env, e)
		}
	}
	// Killed at cleanup if still running; its children get their parent-death signal.
	return testproc.Start(t, "demo", testproc.Options{Env: env}, b.demo, args...)
}

// number returns the first group of re in out as an int, failing when it is missing.
func number(t *testing.T, out string, re *regexp.Regexp) int {
	t.Helper()
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line matching %s in the output:\n%s", re, out)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkCleanedUp fails when the demo left its temporary directory or any listener behind.
func checkCleanedUp(t *testing.T, out string, addrs []string) {
	t.Helper()
	m := regexp.MustCompile(`files:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo did not print its files directory:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still there after the demo exited (stat: %v)", m[1], err)
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s still taken after the demo exited: %v", a, err)
			continue
		}
		_ = ln.Close()
	}
}

// TestDemoRollingUpdate is `make demo` with fast timings: the whole story must end well.
func TestDemoRollingUpdate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for ~20 s")
	}
	t.Parallel()
	b := buildBins(t)
	// Offset 1000: 19080, 20090, 20101-20104, which nothing else uses (a real `make demo`
	// uses the unshifted ports).
	// A run takes 7-35 s (measured); the timeout only covers the rare long tail, when both
	// backends of a pool keep announcing leaving at the same moment, are both warned and both
	// start over.
	r := startDemo(t, b, "-rounds", "1", "-timings", "fast", "-quiet", "-port-offset", "1000", "-timeout", "75s")
	code := r.ExitCode(t, 100*time.Second)
	out := r.Output()
	t.Logf("demo output:\n%s", out)
	if code != 0 {
		t.Fatalf("demo exit code = %d, want 0", code)
	}

	tests := []struct {
		name  string
		re    *regexp.Regexp
		check func(n int) bool
		want  string
	}{
		{name: "requests were served", re: regexp.MustCompile(`(?m)^  requests served: (\d+)$`), check: func(n int) bool { return n > 0 }, want: "> 0"},
		{name: "no request failed", re: regexp.MustCompile(`(?m)^  requests failed: (\d+)$`), check: func(n int) bool { return n == 0 }, want: "0"},
		{name: "every backend updated", re: regexp.MustCompile(`(?m)^  backends updated: (\d+)/4 on v2 `), check: func(n int) bool { return n == 4 }, want: "4"},
		{name: "warnings were sent", re: regexp.MustCompile(`(?m)^  warnings received: (\d+) `), check: func(n int) bool { return n > 0 }, want: "> 0"},
		{name: "pool-acme kept its threshold", re: regexp.MustCompile(`(?m)^  min in service pool-acme: (\d+) \(threshold 1\) ok;`), check: func(n int) bool { return n >= 1 }, want: ">= 1"},
		{name: "default kept its threshold", re: regexp.MustCompile(`(?m)^  min in service default: (\d+) \(threshold 1\) ok;`), check: func(n int) bool { return n >= 1 }, want: ">= 1"},
		{name: "state was sampled", re: regexp.MustCompile(`(?m)^  state samples: (\d+) \(`), check: func(n int) bool { return n >= 10 }, want: ">= 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := number(t, out, tc.re); !tc.check(n) {
				t.Errorf("%s: got %d, want %s", tc.re, n, tc.want)
			}
		})
	}
	if !strings.Contains(out, "\nresult: ok\n") {
		t.Errorf("no \"result: ok\" line")
	}
	for _, want := range []string{"status page: http://127.0.0.1:20090/", "curl -H 'Host: shop.localhost' http://127.0.0.1:19080/"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not show %q", want)
		}
	}
	checkCleanedUp(t, out, []string{"127.0.0.1:19080", "127.0.0.1:20090", "127.0.0.1:20101", "127.0.0.1:20102", "127.0.0.1:20103", "127.0.0.1:20104"})
}

// TestDemoInterrupted stops the demo with SIGINT in the middle of the update: it must stop
// every process, remove its files and fail, since the update did not finish.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	t.Parallel()
	b := buildBins(t)
	r := startDemo(t, b, "-timings", "normal", "-quiet", "-ports-from-config=false", "-timeout", "50s")
	// The first frame of the view means every process is up and the scripts are running.
	r.WaitFor(t, 40*time.Second, "the live view", func() bool { return strings.Contains(r.Output(), "requests served ") })
	r.Signal(t, syscall.SIGINT)
	code := r.ExitCode(t, 30*time.Second)
	out := r.Output()
	if code != 1 {
		t.Errorf("exit code = %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{"stopping: interrupted", "\nresult: FAILED\n", "  - interrupted\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var addrs []string
	for _, m := range regexp.MustCompile(`(?:http://|=)(127\.0\.0\.1:\d+)\b`).FindAllStringSubmatch(out, -1) {
		if !slices.Contains(addrs, m[1]) {
			addrs = append(addrs, m[1])
		}
	}
	if len(addrs) != 6 {
		t.Fatalf("want the status page, proxy and 4 backend addresses in the output, got %v:\n%s", addrs, out)
	}
	checkCleanedUp(t, out, addrs)
}

// Issue 28: a demo run by make whose port is taken says how to shift the ports through make.
func TestDemoBusyPortAdviceUnderMake(t *testing.T) {
	b := buildBins(t)
	// The demo's admin port, 19090, shifted by an offset nothing else here uses.
	const offset = 7311
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 19090+offset))
	if err != nil {
		t.Skipf("cannot hold the port to make it busy: %v", err)
	}
	defer ln.Close()
	p := testproc.Start(t, "demo", testproc.Options{Env: append(os.Environ(), "DEMO_VIA_MAKE=1")}, b.demo,
		"-pollbal", b.pollbal, "-backend", b.backend, "-update-script", b.script, "-port-offset", fmt.Sprint(offset), "-quiet")
	if code := p.ExitCode(t, time.Minute); code != 1 {
		t.Fatalf("exit %d with a busy port, want 1", code)
	}
	if want := `try make demo DEMO_FLAGS="-port-offset 1000" or make demo DEMO_FLAGS="-ports-from-config=false"`; !strings.Contains(p.Stderr(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, p.Stderr())
	}
}
