package testproc

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary, started again by these tests, act as the child named in it.
const childEnv = "TESTPROC_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "echo": // prints where it listens, copies stdin to stderr, exits 3 at EOF
		fmt.Println("starting")
		fmt.Println("listening 127.0.0.1:1234")
		_, _ = io.Copy(os.Stderr, os.Stdin)
		os.Exit(3)
	case "term": // exits 0 on SIGTERM after saying so
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("ready")
		<-ch
		fmt.Println("got SIGTERM")
		os.Exit(0)
	case "parent": // starts a "term" child, prints its pid, waits for it
		self, _ := os.Executable()
		p, err := os.StartProcess(self, []string{self}, &os.ProcAttr{
			Env: append(os.Environ(), childEnv+"=block"), Files: []*os.File{nil, nil, os.Stderr}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("child %d\n", p.Pid)
		_, _ = p.Wait()
		os.Exit(0)
	case "block":
		select {}
	}
}

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestStartWaitLineExitCode(t *testing.T) {
	p, addr := StartServer(t, "echo", Options{Env: append(os.Environ(), childEnv+"=echo"), Stdin: strings.NewReader("to stderr\n")}, self(t))
	if addr != "127.0.0.1:1234" {
		t.Errorf("StartServer's address = %q, want 127.0.0.1:1234", addr)
	}
	if code := p.ExitCode(t, 30*time.Second); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if got, want := p.Stdout(), "starting\nlistening 127.0.0.1:1234\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := p.Stderr(); got != "to stderr\n" {
		t.Errorf("stderr %q, want the standard input", got)
	}
	if out := p.Output(); !strings.Contains(out, "listening") || !strings.Contains(out, "to stderr") {
		t.Errorf("output %q lacks stdout or stderr", out)
	}
}

// Cleanup sends Options.Stop and lets the child exit on it rather than killing it.
func TestCleanupSendsStop(t *testing.T) {
	var p *Proc
	var lines []string // written by OnLine until Done, read after
	t.Run("run", func(t *testing.T) {
		p = Start(t, "term", Options{Env: append(os.Environ(), childEnv+"=term"), Stop: syscall.SIGTERM,
			OnLine: func(l string) { lines = append(lines, l) }}, self(t))
		p.WaitLine(t, 30*time.Second, "ready")
	})
	if !p.Exited() {
		t.Fatal("the child outlived its test's cleanup")
	}
	if len(lines) != 2 || lines[0] != "ready" {
		t.Errorf("OnLine saw %q, want ready, then the handler's line", lines)
	}
	if err := p.Err(); err != nil {
		t.Errorf("exit: %v, want status 0 after SIGTERM; output %q", err, p.Output())
	}
	if !strings.Contains(p.Stdout(), "got SIGTERM") {
		t.Errorf("stdout %q, want the SIGTERM handler's line", p.Stdout())
	}
}

// With Options.Group, Kill ends what the child started too.
func TestGroupKillEndsGrandchild(t *testing.T) {
	p := Start(t, "parent", Options{Env: append(os.Environ(), childEnv+"=parent"), Group: true}, self(t))
	pid, err := strconv.Atoi(p.WaitLine(t, 30*time.Second, "child "))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatalf("grandchild %d not running", pid)
	}
	p.Kill()
	WaitFor(t, 30*time.Second, "the grandchild to end", func() bool { return !alive(pid) })
}

// alive says whether pid runs (a zombie, ended but not yet reaped, does not count).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestWaitForReturnsElapsed(t *testing.T) {
	start := time.Now()
	n := 0
	took := WaitFor(t, 30*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 || took < 0 || took > time.Since(start) {
		t.Errorf("polled %d times, took %s", n, took)
	}
}
