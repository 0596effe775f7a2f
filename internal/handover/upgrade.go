package handover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readyByte is what a new process writes to its readiness pipe.
const readyByte = '1'

// Upgrade starts the program at the path this process was started by, with its arguments and
// environment, hands it the listeners that Listen returned, and waits until it calls Ready.
// Only then does it return the new process's pid: the caller stops accepting (closes its
// listeners), finishes what is in flight and exits. Its listeners are still open until then,
// and the new process holds duplicates, so closing them refuses no connection.
//
// When the new process cannot start, exits, is not ready within the ready timeout, or ctx ends
// first, Upgrade kills it (if it runs), waits until it is gone, and returns why, with its pid
// (0 when none started). Nothing of this process changed: it keeps serving.
//
// One upgrade at a time: while one runs Upgrade returns ErrUpgradeInProgress; after one
// succeeded, ErrHandedOver; before Ready, ErrNotReady. Those are not counted in
// pollbal_upgrades_total; every other call is, once. Upgrade logs each upgrade's start and
// end, so the caller need not.
func (h *Handover) Upgrade(ctx context.Context) (int, error) {
	if !h.upgrading.CompareAndSwap(false, true) {
		return 0, ErrUpgradeInProgress
	}
	defer h.upgrading.Store(false)
	if pid := h.handedTo.Load(); pid != 0 {
		return 0, fmt.Errorf("%w (pid %d)", ErrHandedOver, pid)
	}
	h.mu.Lock()
	ready := h.ready
	h.mu.Unlock()
	if !ready {
		return 0, ErrNotReady
	}

	start := time.Now()
	pid, result, err := h.upgrade(ctx)
	h.upgrades[result].Inc()
	if err != nil {
		h.log.Error("upgrade failed; this process keeps serving", "result", result, "pid", pid, "err", err)
		return pid, fmt.Errorf("upgrade: %w", err)
	}
	h.handedTo.Store(int64(pid))
	h.log.Info("upgrade: the new process is ready; hand over to it", "pid", pid, "took", time.Since(start).Round(time.Millisecond))
	return pid, nil
}

// upgrade runs one upgrade and returns the new process's pid (0 when none started) and the
// result to count.
func (h *Handover) upgrade(ctx context.Context) (int, string, error) {
	if h.pathErr != nil {
		return 0, resultFailed, fmt.Errorf("cannot tell which program to start: %w", h.pathErr)
	}
	if err := context.Cause(ctx); err != nil {
		return 0, resultFailed, fmt.Errorf("cancelled before it started (%w)", err)
	}
	names, files, err := h.dupListeners()
	defer closeAll(files)
	if err != nil {
		return 0, resultFailed, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, resultFailed, fmt.Errorf("readiness pipe: %w", err)
	}
	defer readyR.Close()

	cmd := exec.Command(h.path, h.args...)
	cmd.Dir = h.dir
	cmd.Env = childEnv(os.Environ(), names)
	cmd.ExtraFiles = append(files, readyW) // descriptors 3, 4, ... as childEnv says
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Start()
	_ = readyW.Close() // the child's copy is the only writer left: its exit ends readyR
	if err != nil {
		return 0, resultFailed, fmt.Errorf("start %s: %w", h.path, err)
	}
	pid := cmd.Process.Pid
	h.log.Info("upgrade: started the new process; waiting until it is ready", "pid", pid, "path", h.path, "timeout", h.readyTimeout)

	// exited reaps the child whenever it exits, even long after a successful hand-over.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	signalled := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := io.ReadFull(readyR, b[:])
		signalled <- n == 1 && b[0] == readyByte
	}()
	timer := time.NewTimer(h.readyTimeout)
	defer timer.Stop()

	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	for {
		select {
		case ok := <-signalled:
			if !ok {
				// It closed the pipe without signalling: it exited (reported next), or it
				// dropped the descriptor and will never signal; the timer settles that.
				signalled = nil
				continue
			}
			if err := notify(h.notifySocket, "MAINPID="+strconv.Itoa(pid)); err != nil {
				// The service manager would take this process's exit for the service's.
				kill()
				return pid, resultFailed, fmt.Errorf("new process %d is ready, but the service manager was not told it is the main process now (so it would stop the service when this one exits); killed it: %w", pid, err)
			}
			return pid, resultOK, nil
		case err := <-exited:
			return pid, resultFailed, fmt.Errorf("new process %d %s before it was ready", pid, exitReason(err))
		case <-timer.C:
			kill()
			return pid, resultTimeout, fmt.Errorf("new process %d was not ready within %s; killed it", pid, h.readyTimeout)
		case <-ctx.Done():
			kill()
			return pid, resultFailed, fmt.Errorf("new process %d: cancelled before it was ready (%w); killed it", pid, context.Cause(ctx))
		}
	}
}

// dupListeners duplicates every listener Listen returned, in the order proxy, tls, admin.
func (h *Handover) dupListeners() ([]string, []*os.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	var files []*os.File
	for _, name := range knownNames() {
		ln, ok := h.listeners[name]
		if !ok {
			continue
		}
		f, err := dupListener(ln, name)
		if err != nil {
			return names, files, err
		}
		names, files = append(names, name), append(files, f)
	}
	return names, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// exitReason words cmd.Wait's error: "exited with status 1", "was killed by signal ...".
func exitReason(err error) string {
	var ee *exec.ExitError
	if err == nil {
		return "exited with status 0"
	}
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "was killed by signal " + ws.Signal().String()
		}
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// binaryPath is the program an upgrade starts: the path this process was started by (arg0),
// made absolute against the working directory wd, or found in PATH (lookPath) when arg0 has no
// slash. It is not the executable's own path (executable, from /proc/self/exe), which is
// resolved through symbolic links: an upgrade that switches a link (/opt/pollbal/current to the
// new release) must start the binary the link names now. executable is the fallback when arg0
// says nothing usable.
func binaryPath(arg0, wd string, lookPath func(string) (string, error), executable func() (string, error)) (string, error) {
	switch {
	case strings.Contains(arg0, "/") && filepath.IsAbs(arg0):
		return filepath.Clean(arg0), nil
	case strings.Contains(arg0, "/"):
		return filepath.Join(wd, arg0), nil
	case arg0 != "":
		if p, err := lookPath(arg0); err == nil && filepath.IsAbs(p) {
			return p, nil
		}
	}
	p, err := executable()
	if err != nil {
		return "", fmt.Errorf("the path this process was started by (%q) is not a file, and its executable is unknown: %w", arg0, err)
	}
	return p, nil
}
