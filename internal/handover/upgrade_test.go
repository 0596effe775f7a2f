package handover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/internal/testproc"
)

// parent is the test process playing the old pollbal: a Handover with one listener (proxy) that
// its own HTTP server serves, answering with the test's pid.
type parent struct {
	h    *Handover
	reg  *prometheus.Registry
	ln   net.Listener
	srv  *server
	addr string
}

// startParent builds the parent with o (Names and Registerer set here) and makes it ready. The
// process an upgrade starts is the test binary: TestMain makes it the helper that setHelper
// chose.
func startParent(t *testing.T, o Options) *parent {
	t.Helper()
	p := buildParent(t, o)
	if err := p.h.Ready(); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildParent is startParent without Ready.
func buildParent(t *testing.T, o Options) *parent {
	t.Helper()
	p := &parent{reg: prometheus.NewRegistry()}
	o.Names, o.Registerer = []string{Proxy}, p.reg
	var err error
	if p.h, err = New(o); err != nil {
		t.Fatal(err)
	}
	if p.ln, err = p.h.Listen(Proxy, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.addr = p.ln.Addr().String()
	p.srv = serve(p.ln)
	t.Cleanup(func() { _ = p.srv.srv.Close() })
	return p
}

// setHelper makes the processes this test starts the helper in mode, configured with listen.
func setHelper(t *testing.T, mode, listen string) {
	t.Setenv(helperEnv, mode)
	t.Setenv(listenEnv, listen)
}

// endChild kills the process an upgrade started at the test's end and waits until the
// Handover's reaper has collected it.
func endChild(t *testing.T, pid int) {
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		testproc.WaitFor(t, 10*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool { return gone(pid) })
	})
}

// assertUpgrades checks pollbal_upgrades_total, every result.
func assertUpgrades(t *testing.T, reg *prometheus.Registry, ok, failed, timeout int) {
	t.Helper()
	want := fmt.Sprintf(`# HELP pollbal_upgrades_total %s
# TYPE pollbal_upgrades_total counter
pollbal_upgrades_total{result="failed"} %d
pollbal_upgrades_total{result="ok"} %d
pollbal_upgrades_total{result="timeout"} %d
`, upgradesHelp, failed, ok, timeout)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pollbal_upgrades_total"); err != nil {
		t.Error(err)
	}
}

// nonBlocking says whether ln's socket is in non-blocking mode, as Go's poller needs it.
func nonBlocking(t *testing.T, ln net.Listener) bool {
	t.Helper()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	if err := rc.Control(func(fd uintptr) {
		flags, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil {
		t.Fatal(err)
	}
	return flags&syscall.O_NONBLOCK != 0
}

// unblock puts ln back in non-blocking mode and connects once, so that an Accept blocked in the
// kernel returns and the test's cleanup can close ln.
func unblock(t *testing.T, ln net.Listener, addr string) {
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), true) })
	if c, err := net.Dial("tcp", addr); err == nil {
		_ = c.Close()
	}
}

// socketInode is the inode that names ln's socket in /proc/PID/fd ("socket:[inode]").
func socketInode(t *testing.T, ln net.Listener) uint64 {
	t.Helper()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return st.Ino
}

// descriptorsOf lists this process's descriptors that refer to the socket inode.
func descriptorsOf(t *testing.T, inode uint64) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []string
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == fmt.Sprintf("socket:[%d]", inode) {
			fds = append(fds, e.Name())
		}
	}
	return fds
}

// TestUpgradeRefusesNoConnection is the upgrade as it runs in production, with the test as the
// old process: while clients keep opening connections, Upgrade starts the new process on the
// same socket, the old one stops accepting and drains, and no connection fails; the new
// process answers afterwards; the old process holds no descriptor of the socket once it closed
// its listener (the new one's survives), and a second Upgrade is refused.
func TestUpgradeRefusesNoConnection(t *testing.T) {
	setHelper(t, "serve", "proxy=127.0.0.1:0")
	p := startParent(t, Options{})
	inode := socketInode(t, p.ln)

	var mu sync.Mutex
	answers := map[int]int{} // pid → answers
	var failures atomic.Int64
	var firstFailure atomic.Value
	client := newClient()
	stop := testproc.Workers(4, func(_, _ int) bool {
		a, err := ask(client, p.addr)
		if err != nil {
			failures.Add(1)
			firstFailure.CompareAndSwap(nil, err.Error())
			return true
		}
		mu.Lock()
		answers[a.pid]++
		mu.Unlock()
		return true
	})
	defer stop()
	count := func(pid int) int {
		mu.Lock()
		defer mu.Unlock()
		return answers[pid]
	}
	testproc.WaitFor(t, 20*time.Second, "answers from the old process", func() bool { return count(os.Getpid()) >= 20 })

	pid, err := p.h.Upgrade(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	endChild(t, pid)
	if pid == os.Getpid() || pid <= 0 {
		t.Fatalf("Upgrade returned pid %d", pid)
	}
	// The old process stops accepting and finishes what is in flight.
	if err := p.srv.drain(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	afterDrain := count(pid)
	testproc.WaitFor(t, 20*time.Second, "answers from the new process after the old one closed its listener",
		func() bool { return count(pid) >= afterDrain+20 })
	stop()

	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed across the upgrade; the first: %v", n, firstFailure.Load())
	}
	mu.Lock()
	for who, n := range answers {
		if who != os.Getpid() && who != pid {
			t.Errorf("%d answers from pid %d, which is neither the old (%d) nor the new process (%d)", n, who, os.Getpid(), pid)
		}
	}
	mu.Unlock()
	if fds := descriptorsOf(t, inode); len(fds) != 0 {
		t.Errorf("the old process still holds descriptors %v of the listening socket after closing its listener", fds)
	}
	if _, err := p.h.Upgrade(context.Background()); !errors.Is(err, ErrHandedOver) {
		t.Errorf("a second Upgrade after a successful one: %v, want ErrHandedOver", err)
	}
	assertUpgrades(t, p.reg, 1, 0, 0)
}

// TestFailedUpgradeKeepsServing: each way the new process can fail ends in an error that says
// why, that process gone, the old process answering on its listener (still non-blocking: see
// dupListener), and the failure counted.
func TestFailedUpgradeKeepsServing(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(garbage, []byte("\x00\x01 not an executable format\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		mode, listen string
		path         string        // Options.Path; "" is the test binary
		readyTimeout time.Duration // Options.ReadyTimeout; 0 is the default
		ctxTimeout   time.Duration // 0: no deadline on Upgrade's context
		want         string        // in the error
		started      bool          // a process was started (Upgrade returns its pid)
		failed       int           // pollbal_upgrades_total{result="failed"}
		timeout      int           // pollbal_upgrades_total{result="timeout"}
	}{
		{name: "exits before ready", mode: "exit", listen: "proxy=127.0.0.1:0",
			want: "exited with status 3 before it was ready", started: true, failed: 1},
		{name: "its configuration disagrees with the socket", mode: "serve", listen: "proxy=127.0.0.2:1",
			want: "exited with status 1 before it was ready", started: true, failed: 1},
		{name: "never ready", mode: "hang", listen: "proxy=127.0.0.1:0", readyTimeout: time.Second,
			want: "was not ready within 1s; killed it", started: true, timeout: 1},
		{name: "cancelled", mode: "hang", listen: "proxy=127.0.0.1:0", ctxTimeout: time.Second,
			want: "cancelled before it was ready (context deadline exceeded); killed it", started: true, failed: 1},
		{name: "no such program", mode: "serve", listen: "proxy=127.0.0.1:0", path: filepath.Join(t.TempDir(), "missing"),
			want: "no such file or directory", failed: 1},
		{name: "not a program", mode: "serve", listen: "proxy=127.0.0.1:0", path: garbage,
			want: "exec format error", failed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setHelper(t, tc.mode, tc.listen)
			p := startParent(t, Options{Path: tc.path, ReadyTimeout: tc.readyTimeout})
			ctx := context.Background()
			if tc.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
				defer cancel()
			}
			pid, err := p.h.Upgrade(ctx)
			if err == nil {
				endChild(t, pid)
				t.Fatalf("Upgrade succeeded (pid %d)", pid)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			switch {
			case tc.started && pid <= 0:
				t.Errorf("Upgrade returned pid %d, want the started process's", pid)
			case tc.started && !gone(pid):
				t.Errorf("process %d still exists after the failed upgrade", pid)
			case !tc.started && pid != 0:
				t.Errorf("Upgrade returned pid %d though nothing started", pid)
			}
			a, err := ask(newClient(), p.addr)
			if err != nil || a.pid != os.Getpid() {
				t.Errorf("the old process after the failed upgrade: %+v, %v; want its own answer", a, err)
			}
			if !nonBlocking(t, p.ln) {
				t.Error("the old process's listener is in blocking mode after the failed upgrade")
				unblock(t, p.ln, p.addr)
			}
			assertUpgrades(t, p.reg, 0, tc.failed, tc.timeout)
		})
	}
}

// TestUpgradeOneAtATime: a second Upgrade while one runs is refused at once with
// ErrUpgradeInProgress and not counted; so is one before Ready (ErrNotReady).
func TestUpgradeOneAtATime(t *testing.T) {
	setHelper(t, "hang", "proxy=127.0.0.1:0")
	p := startParent(t, Options{ReadyTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := p.h.Upgrade(ctx)
		first <- err
	}()
	testproc.WaitFor(t, 10*time.Second, "the first upgrade to run", p.h.upgrading.Load)
	if _, err := p.h.Upgrade(context.Background()); !errors.Is(err, ErrUpgradeInProgress) {
		t.Errorf("a second Upgrade while one runs: %v, want ErrUpgradeInProgress", err)
	}
	cancel()
	if err := <-first; err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("the first upgrade, cancelled: %v", err)
	}
	assertUpgrades(t, p.reg, 0, 1, 0)

	h, err := New(Options{Names: []string{Proxy}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Upgrade(context.Background()); !errors.Is(err, ErrNotReady) {
		t.Errorf("Upgrade before Ready: %v, want ErrNotReady", err)
	}
}

// TestUpgradeStartsTheBinaryNowAtThePath runs both sides as processes: an old pollbal started
// as DIR/pollbal gets SIGUSR2 after a new binary was installed at that path (renamed over it,
// as package managers do), and the process it starts runs the new file, not the one the old
// process runs (its /proc/self/exe). The old process then drains and exits 0.
func TestUpgradeStartsTheBinaryNowAtThePath(t *testing.T) {
	// The new process outlives the old one: as this test's subreaper it becomes this test's
	// child then, which the test can reap.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pollbal")
	install := func() uint64 {
		tmp := bin + ".new"
		copyFile(t, os.Args[0], tmp)
		if err := os.Rename(tmp, bin); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	oldInode := install()
	env := append(os.Environ(), helperEnv+"=serve", listenEnv+"=proxy=127.0.0.1:0")
	old := testproc.Start(t, "old pollbal", testproc.Options{Env: env}, bin, "-test.run=^$")
	addr := old.WaitLine(t, 30*time.Second, "listening proxy ")
	old.WaitLine(t, 30*time.Second, "ready pid=")
	client := newClient()
	if a, err := ask(client, addr); err != nil || a.pid != old.Pid() || a.exe != oldInode {
		t.Fatalf("the old process answers %+v, %v; want pid %d exe %d", a, err, old.Pid(), oldInode)
	}

	newInode := install()
	old.Signal(t, syscall.SIGUSR2)
	var newPID int
	if _, err := fmt.Sscan(old.WaitLine(t, 60*time.Second, "upgraded to "), &newPID); err != nil {
		t.Fatalf("%v; output:\n%s", err, old.Output())
	}
	t.Cleanup(func() { reap(t, newPID) })
	old.WaitLine(t, 30*time.Second, "drained")
	a, err := ask(client, addr)
	if err != nil || a.pid != newPID {
		t.Fatalf("after the upgrade the socket answers %+v, %v; want the new process %d", a, err, newPID)
	}
	if a.exe != newInode || newInode == oldInode {
		t.Errorf("the new process runs the binary with inode %d; the one installed at %s has %d, the old one %d", a.exe, bin, newInode, oldInode)
	}
	// The old process's standard output is shared with the new one, so its end is read when
	// both are gone.
	reap(t, newPID)
	if code := old.ExitCode(t, 30*time.Second); code != 0 {
		t.Errorf("the old process exited with %d after the upgrade, want 0", code)
	}
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (prctl(2)), which package syscall lacks.
const prSetChildSubreaper = 36

// reap kills process pid, this process's child (directly or as its subreaper), and collects it.
func reap(t *testing.T, pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil && !errors.Is(err, syscall.ECHILD) {
		t.Errorf("wait for process %d: %v", pid, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
