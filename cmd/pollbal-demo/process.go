package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"pollbal/internal/latch"
)

// child is one process the demo started, in its own process group so that stopping it also
// stops what it started (the update script's sleeps and update command). It is safe for
// concurrent use and must not be copied.
type child struct {
	name string
	cmd  *exec.Cmd
	log  *tailWriter
	exit *latch.Latch // set when the process has exited
	err  error        // the exit error; read only after exit is set

	stopOnce sync.Once
}

// startChild starts path with args, writing its stdout and stderr to log.
func startChild(name, path string, args []string, log *tailWriter) (*child, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// Should the demo die without cleaning up (SIGKILL), the child is told to stop too.
		Pdeathsig: syscall.SIGTERM,
	}
	// A grandchild that outlives the child (a sleep the script left behind) keeps the output
	// pipe open; do not let it hold up Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: log, exit: latch.New()}
	go func() {
		c.err = cmd.Wait()
		c.exit.Set()
	}()
	return c, nil
}

// exitCode returns the exit code once the process has exited; -1 when a signal ended it.
func (c *child) exitCode() int {
	<-c.exit.Done()
	var ee *exec.ExitError
	switch {
	case c.err == nil:
		return 0
	case errors.As(c.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// stop sends SIGTERM to the child's process group, waits up to grace for the child to exit,
// then kills the group. Whatever is left in the group after the child exited is killed too.
// It is idempotent.
func (c *child) stop(grace time.Duration) {
	c.stopOnce.Do(func() {
		pgid := c.cmd.Process.Pid
		if !c.exit.IsSet() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			t := time.NewTimer(grace)
			select {
			case <-c.exit.Done():
			case <-t.C:
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-c.exit.Done()
			}
			t.Stop()
		}
		// The group is ours: stragglers such as an orphaned sleep go with it. ESRCH (nothing
		// left) is the normal case.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
}

// tailWriter writes everything to a file and keeps the last few complete lines in memory for
// the live view and for error messages. It is safe for concurrent use.
type tailWriter struct {
	mu      sync.Mutex
	f       *os.File
	partial []byte
	lines   []string
	keep    int
	count   func(line string) // called for every complete line; may be nil
}

// newTailWriter creates the file at path.
func newTailWriter(path string, keep int, count func(string)) (*tailWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	return &tailWriter{f: f, keep: keep, count: count}, nil
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.f.Write(p); err != nil {
		return 0, fmt.Errorf("write log: %w", err)
	}
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(t.partial[:i]), "\r")
		t.partial = t.partial[i+1:]
		if t.count != nil {
			t.count(line)
		}
		t.lines = append(t.lines, line)
		if len(t.lines) > t.keep {
			t.lines = t.lines[len(t.lines)-t.keep:]
		}
	}
	return len(p), nil
}

// last returns the last complete line, or "".
func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// tail returns the kept lines joined, for an error message.
func (t *tailWriter) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// Close closes the file.
func (t *tailWriter) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.f.Close()
}

var _ io.WriteCloser = (*tailWriter)(nil)
