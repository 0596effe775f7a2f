package main

// End-to-end harness: builds the real pollbal binary and the example backend once, and starts
// them as processes on 127.0.0.1 with short intervals.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bins holds the binaries built by TestMain.
var bins struct {
	dir, pollbal, backend string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pollbal-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.dir = dir
	bins.pollbal = filepath.Join(dir, "pollbal")
	bins.backend = filepath.Join(dir, "backend")
	for _, b := range []struct{ out, pkg string }{{bins.pollbal, "."}, {bins.backend, "../../examples/backend"}} {
		args := []string{"build", "-o", b.out}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, b.pkg)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b.pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a started process whose output is kept for failure messages.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs name with args; stdout lines are handed to onLine (if non-nil) and everything is
// kept. The process is killed at test cleanup.
func start(t testing.TB, name string, onLine func(string), bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.out, line)
			if onLine != nil {
				onLine(line)
			}
		}
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.out.String())
		}
	})
	return p
}

func (p *proc) signal(sig os.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Logf("signal %s: %v", p.name, err)
	}
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// backend is a running example backend.
type backend struct {
	*proc
	id, addr, poolFile, lockFile string
}

// startBackend starts the example backend on listen ("127.0.0.1:0" for a free port) serving
// poolBody from its pool file.
func startBackend(t testing.TB, id, listen, poolBody string, extra ...string) *backend {
	t.Helper()
	dir := t.TempDir()
	b := &backend{id: id, poolFile: filepath.Join(dir, "pool"), lockFile: filepath.Join(dir, "lock")}
	if err := os.WriteFile(b.poolFile, []byte(poolBody), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start(t, listen, extra...)
	return b
}

func (b *backend) start(t testing.TB, listen string, extra ...string) {
	t.Helper()
	addr := make(chan string, 1)
	args := append([]string{"-listen", listen, "-id", b.id, "-pool-file", b.poolFile, "-lock-file", b.lockFile}, extra...)
	b.proc = start(t, "backend "+b.id, func(line string) {
		if a, ok := strings.CutPrefix(line, "listening "); ok {
			addr <- a
		}
	}, bins.backend, args...)
	select {
	case b.addr = <-addr:
	case <-b.done:
		t.Fatalf("backend %s exited: %s", b.id, b.out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("backend %s did not start", b.id)
	}
}

func (b *backend) setPool(t testing.TB, body string) {
	t.Helper()
	tmp := b.poolFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, b.poolFile); err != nil {
		t.Fatal(err)
	}
}

// backendStats is the example backend's /_backend/stats answer.
type backendStats struct {
	ID           string `json:"id"`
	InFlight     int64  `json:"in_flight"`
	PeakInFlight int64  `json:"peak_in_flight"`
	Requests     int64  `json:"requests"`
	Warnings     int64  `json:"warnings"`
	LastWarning  string `json:"last_warning"`
}

func (b *backend) stats(t testing.TB) backendStats {
	t.Helper()
	var s backendStats
	getJSON(t, "http://"+b.addr+"/_backend/stats", &s)
	return s
}

// freePort returns a 127.0.0.1 address that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// instance is a running pollbal.
type instance struct {
	*proc
	cfgPath, listen, admin string
}

// startPollbal writes cfg (with LISTEN and ADMIN placeholders filled) and runs pollbal on it,
// returning once /readyz answers 200.
func startPollbal(t testing.TB, cfg string) *instance {
	t.Helper()
	in := &instance{cfgPath: filepath.Join(t.TempDir(), "pollbal.yaml"), listen: freePort(t), admin: freePort(t)}
	cfg = fillAddrs(cfg, in.listen, in.admin)
	if err := os.WriteFile(in.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in.proc = start(t, "pollbal", nil, bins.pollbal, "run", "-config", in.cfgPath)
	waitFor(t, 15*time.Second, "pollbal /readyz", func() bool {
		select {
		case <-in.done:
			t.Fatalf("pollbal exited: %s", in.out.String())
		default:
		}
		resp, err := http.Get("http://" + in.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return in
}

func (in *instance) state(t testing.TB) apiState {
	t.Helper()
	var s apiState
	getJSON(t, "http://"+in.admin+"/api/state", &s)
	return s
}

func (in *instance) metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get("http://" + in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// apiState is the part of /api/state the end-to-end tests read.
type apiState struct {
	Site     string `json:"site"`
	Ready    bool   `json:"ready"`
	Backends []struct {
		ID      string `json:"id"`
		Pool    string `json:"pool"`
		Ready   bool   `json:"ready"`
		Reason  string `json:"reason"`
		Warned  bool   `json:"warned"`
		Reports []struct {
			Service, Status, Version string
		} `json:"reports"`
	} `json:"backends"`
	Groups []struct {
		Pool, Service, Version string
		Serving, Leaving       int
		Threshold              int
		Warned                 []string
	} `json:"groups"`
	Apps []struct {
		Name       string `json:"name"`
		Pool       string `json:"pool"`
		Candidates int    `json:"candidates"`
	} `json:"apps"`
}

func (s apiState) backend(id string) (ready bool, reason string, reports string, ok bool) {
	for _, b := range s.Backends {
		if b.ID == id {
			var parts []string
			for _, r := range b.Reports {
				parts = append(parts, strings.TrimSpace(r.Service+" "+r.Status+" "+r.Version))
			}
			return b.Ready, b.Reason, strings.Join(parts, ";"), true
		}
	}
	return false, "", "", false
}

func getJSON(t testing.TB, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// waitFor polls cond every 10 ms until it holds or timeout passes (a bounded poll, not a sleep
// standing in for an event).
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
