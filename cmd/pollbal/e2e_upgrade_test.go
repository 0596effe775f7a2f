package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// prSetChildSubreaper is prctl(2)'s PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// adoptOrphans makes the test process the subreaper of its descendants until the test ends.
// The pollbal that an upgrade starts is the old pollbal's child, not the test's; once the old
// one exits it becomes the test's child, so that the test can read its exit status when it
// exits (it stays a zombie until the test reaps it) and end it by pid.
func adoptOrphans(t *testing.T) {
	t.Helper()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	t.Cleanup(func() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

// exitStatus waits up to timeout for process pid, a child of the test, to exit, and returns
// its exit status (-1 when a signal ended it) without reaping it: it reads the zombie's
// /proc/<pid>/stat. The first pollbal is reaped by its testproc.Proc, which reads its output
// until every process that inherited it (the upgraded ones) has exited; the others by reap.
func exitStatus(t *testing.T, pid int, timeout time.Duration) int {
	t.Helper()
	var status int
	testproc.WaitFor(t, timeout, fmt.Sprintf("pollbal %d to exit", pid), func() bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("pollbal %d: %v (reaped by someone else?)", pid, err)
		}
		// pid (comm) state ppid ... exit_code: the fields after the command's ")" start at
		// the state (field 3); exit_code, a wait status, is field 52.
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 50 || f[0] != "Z" {
			return false
		}
		ws, err := strconv.Atoi(f[49])
		if err != nil {
			t.Fatalf("pollbal %d: exit_code %q in %s", pid, f[49], data)
		}
		status = syscall.WaitStatus(ws).ExitStatus()
		return true
	})
	return status
}

// reapLater ends (SIGKILL) and reaps pid at the test's end, unless it was reaped before; a pid
// that is not the test's child is only killed.
func reapLater(t *testing.T, pid int) {
	t.Cleanup(func() {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid || errors.Is(err, syscall.ECHILD) && syscall.Kill(pid, 0) != nil {
			return
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		testproc.WaitFor(t, 10*time.Second, fmt.Sprintf("pollbal %d to be gone", pid), func() bool {
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			return got == pid || errors.Is(err, syscall.ECHILD)
		})
	})
}

// statePID reads the serving process's pid from /api/state on a new connection.
func statePID(admin string) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + admin + "/api/state")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.PID, nil
}

// keepAlive is a client that sends its requests one after the other on one connection, at
// full speed, the way wrk does: raw HTTP/1.1, no retry of its own. An error on the socket or
// an answer other than 200 is a failed request; after Connection: close it reconnects.
type keepAlive struct {
	addr, host string
	c          net.Conn
	br         *bufio.Reader
}

func (k *keepAlive) do() error {
	if k.c == nil {
		c, err := net.DialTimeout("tcp", k.addr, 5*time.Second)
		if err != nil {
			return err
		}
		k.c, k.br = c, bufio.NewReader(c)
	}
	fail := func(err error) error {
		k.c.Close()
		k.c = nil
		return err
	}
	if err := k.c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return fail(err)
	}
	if _, err := k.c.Write([]byte("GET / HTTP/1.1\r\nHost: " + k.host + "\r\n\r\n")); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(k.br, nil)
	if err != nil {
		return fail(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fail(err)
	}
	if resp.Close {
		k.c.Close()
		k.c = nil
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%d %s", resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"))
	}
	return nil
}

// upgradeLoad is the clients of TestEndToEndUpgradesUnderLoad and what they saw.
type upgradeLoad struct {
	ok, slowOK, failed atomic.Int64
	mu                 sync.Mutex
	errs               []string // the first few failures
	stop               func()
}

func startUpgradeLoad(listen string, clients int) *upgradeLoad {
	l := &upgradeLoad{}
	conns := make([]*keepAlive, clients)
	for w := range conns {
		host := "www.test"
		if w%4 == 0 {
			host = "slow.test"
		}
		conns[w] = &keepAlive{addr: listen, host: host}
	}
	l.stop = testproc.Workers(clients, func(w, _ int) bool {
		if err := conns[w].do(); err != nil {
			l.failed.Add(1)
			l.mu.Lock()
			if len(l.errs) < 10 {
				l.errs = append(l.errs, fmt.Sprintf("%s: %v", conns[w].host, err))
			}
			l.mu.Unlock()
		} else {
			l.ok.Add(1)
			if conns[w].host == "slow.test" {
				l.slowOK.Add(1)
			}
		}
		return true
	})
	return l
}

// upgradeConfig has a fast backend for app www and a slow one (200 ms per answer) for app
// slow, and keeps its state in stateDir.
func upgradeConfig(token, stateDir, fast, slow string) string {
	return fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN, token_file: %s}
state_dir: %s
poll: {interval: 500ms, timeout: 400ms}
proxy: {shutdown_timeout: 10s}
services: {web: {}}
apps:
  - {name: slow, hosts: ["slow.test"], pool: slow}
  - {name: www, hosts: ["*"]}
backends:
  - {id: fast-1, address: %s}
  - {id: slow-1, address: %s, pool: slow}
`, token, stateDir, fast, slow)
}

// TestEndToEndUpgradesUnderLoad: three SIGUSR2 upgrades in a row under 16 keep-alive clients
// at full speed, a quarter of them on a backend that takes 200 ms per answer: no request
// fails, the pid in /api/state changes each time, and every old process exits 0.
func TestEndToEndUpgradesUnderLoad(t *testing.T) {
	adoptOrphans(t)
	fast := startBackend(t, "fast-1", "127.0.0.1:0", "web serving v1\n")
	slow := startBackend(t, "slow-1", "127.0.0.1:0", "web serving v1\n", "-delay", "200ms")
	pb := startPollbal(t, upgradeConfig(writeToken(t), filepath.Join(t.TempDir(), "state"), fast.addr, slow.addr))
	testproc.WaitFor(t, 10*time.Second, "both backends ready", func() bool {
		a, _, _, _ := pb.state(t).backend("fast-1")
		b, _, _, _ := pb.state(t).backend("slow-1")
		return a && b
	})

	load := startUpgradeLoad(pb.listen, 16)
	defer load.stop()
	waitServed := func(what string, n int64) {
		t.Helper()
		from, slowFrom := load.ok.Load(), load.slowOK.Load()
		testproc.WaitFor(t, 30*time.Second, what, func() bool {
			return load.ok.Load() >= from+n && load.slowOK.Load() >= slowFrom+4
		})
	}
	waitServed("requests before the first upgrade", 200)

	pids := []int{pb.Pid()}
	for i := 1; i <= 3; i++ {
		old := pids[len(pids)-1]
		if err := syscall.Kill(old, syscall.SIGUSR2); err != nil {
			t.Fatalf("upgrade %d: SIGUSR2 to %d: %v", i, old, err)
		}
		var next int
		testproc.WaitFor(t, 60*time.Second, fmt.Sprintf("upgrade %d: a new pid in /api/state", i), func() bool {
			pid, err := statePID(pb.admin)
			next = pid
			return err == nil && pid != old
		})
		reapLater(t, next)
		// The old one drains and exits 0; the new one is the test's child from then on.
		if code := exitStatus(t, old, 30*time.Second); code != 0 {
			t.Errorf("upgrade %d: the old process %d exited %d, want 0", i, old, code)
		}
		if i > 1 {
			// A zombie leader is reapable once its process's other threads are gone too.
			testproc.WaitFor(t, 10*time.Second, fmt.Sprintf("upgrade %d: the old process %d reaped", i, old), func() bool {
				var ws syscall.WaitStatus
				got, err := syscall.Wait4(old, &ws, syscall.WNOHANG, nil)
				if err != nil {
					t.Fatalf("upgrade %d: reaping the old process %d: %v", i, old, err)
				}
				return got == old
			})
		}
		pids = append(pids, next)
		waitServed(fmt.Sprintf("requests after upgrade %d", i), 200)
	}
	load.stop()
	t.Logf("pids %v; %d requests answered (%d slow), %d failed", pids, load.ok.Load(), load.slowOK.Load(), load.failed.Load())
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d requests failed across the upgrades, want 0; first ones: %q", n, load.errs)
	}
	if n := strings.Count(pb.Output(), `msg="runtime state restored"`); n != 3 {
		t.Errorf("%d new processes restored the state, want 3:\n%s", n, pb.Output())
	}

	last := pids[len(pids)-1]
	if err := syscall.Kill(last, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitStatus(t, last, 30*time.Second); code != 0 {
		t.Errorf("the last process exited %d on SIGTERM, want 0", code)
	}
}

// copyBinary copies pollbal to dir, so that a test can replace the file an upgrade starts.
func copyBinary(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(bins.pollbal)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pollbal")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceFile replaces path with an executable holding content (written beside it, renamed
// over it: the running binary's file is not written into).
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestEndToEndFailedUpgrades: an upgrade whose new process fails (an invalid configuration; a
// binary that never becomes ready and is killed) leaves the old process serving, counted in
// pollbal_upgrades_total{result="failed"}; POST /admin/upgrade answers 409 while an upgrade
// runs and 500 with the reason when it fails; SIGTERM during an upgrade cancels it (the new
// process is killed) and pollbal exits 0.
func TestEndToEndFailedUpgrades(t *testing.T) {
	dir := t.TempDir()
	bin := copyBinary(t, dir)
	fast := startBackend(t, "fast-1", "127.0.0.1:0", "web serving v1\n")
	slow := startBackend(t, "slow-1", "127.0.0.1:0", "web serving v1\n")
	cfg := upgradeConfig(writeToken(t), filepath.Join(dir, "state"), fast.addr, slow.addr)
	pb := &instance{cfgPath: filepath.Join(dir, "pollbal.yaml"), listen: testproc.FreeAddr(t), admin: testproc.FreeAddr(t)}
	cfg = fillAddrs(cfg, pb.listen, pb.admin)
	if err := os.WriteFile(pb.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pb.start(t, "pollbal", testproc.Options{}, "/readyz", bin, "run", "-config", pb.cfgPath)
	serves := func(what string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second}
		testproc.WaitFor(t, 10*time.Second, what, func() bool {
			a, err := do(t, c, "http://"+pb.listen+"/", "www.test")
			return err == nil && a.code == 200
		})
		if pid, err := statePID(pb.admin); err != nil || pid != pb.Pid() {
			t.Fatalf("%s: /api/state names pid %d (%v), want the first process %d", what, pid, err, pb.Pid())
		}
	}
	failed := func() float64 {
		n, _ := metrictest.TextValue(t, pb.metrics(t), `pollbal_upgrades_total{result="failed"}`)
		return n
	}
	serves("serving before any upgrade")

	// 1. The new process cannot load its configuration.
	writeInPlace(t, pb.cfgPath, cfg+"bogus: 1\n")
	pb.Signal(t, syscall.SIGUSR2)
	pb.WaitOutput(t, 30*time.Second, "the failed upgrade logged", `msg="upgrade failed; this process keeps serving" result=failed`)
	if n := failed(); n != 1 {
		t.Errorf(`pollbal_upgrades_total{result="failed"} = %v, want 1`, n)
	}
	serves("serving after the new process exited")
	writeInPlace(t, pb.cfgPath, cfg)

	// 2. A binary that never becomes ready: a second upgrade meanwhile is refused, and the
	// first fails with the reason once its process is killed.
	pidFile := filepath.Join(dir, "stuck.pid")
	replaceFile(t, bin, fmt.Sprintf("#!/bin/sh\necho $$ > %[1]s.tmp && mv %[1]s.tmp %[1]s\nexec sleep 60\n", pidFile))
	stuckPID := func() int {
		t.Helper()
		var pid int
		testproc.WaitFor(t, 30*time.Second, "the stuck binary to start", func() bool {
			data, err := os.ReadFile(pidFile)
			if err != nil {
				return false
			}
			pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
			return err == nil
		})
		if err := os.Remove(pidFile); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := make(chan [2]string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+pb.admin+"/admin/upgrade", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			first <- [2]string{"error", err.Error()}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- [2]string{strconv.Itoa(resp.StatusCode), string(body)}
	}()
	stuck := stuckPID()
	if code, body := adminCall(t, pb, http.MethodPost, "/admin/upgrade", ""); code != http.StatusConflict || !strings.Contains(body, "already in progress") {
		t.Errorf("POST /admin/upgrade while one runs: %d %s, want 409", code, body)
	}
	serves("serving while the new process hangs")
	if err := syscall.Kill(stuck, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-first:
		if got[0] != "500" || !strings.Contains(got[1], "killed by signal") || !strings.Contains(got[1], "keeps serving") {
			t.Errorf("the failed POST /admin/upgrade answered %s %s, want 500 with the reason", got[0], got[1])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("POST /admin/upgrade did not answer after its new process died")
	}
	if n := failed(); n != 2 {
		t.Errorf(`pollbal_upgrades_total{result="failed"} = %v, want 2`, n)
	}
	serves("serving after the stuck process was killed")
	pb.WaitOutput(t, 5*time.Second, "the upgrade call audited", `action=upgrade target="" status=500`)

	// 3. SIGTERM while an upgrade waits for its new process: the upgrade is cancelled, the
	// new process killed, and pollbal exits 0.
	pb.Signal(t, syscall.SIGUSR2)
	stuck = stuckPID()
	pb.Signal(t, syscall.SIGTERM)
	if code := pb.ExitCode(t, 30*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM during an upgrade, want 0", code)
	}
	if err := syscall.Kill(stuck, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the new process of the cancelled upgrade (%d) is still there: %v", stuck, err)
		_ = syscall.Kill(stuck, syscall.SIGKILL)
	}
}
