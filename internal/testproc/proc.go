package testproc

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Options say how Start runs a child. The zero value inherits the test's environment, gives the
// child no standard input and ends it with SIGKILL at cleanup.
type Options struct {
	// Env is the child's environment; nil inherits the test's.
	Env []string
	// Dir is the child's working directory; "" is the test's.
	Dir string
	// Stdin is the child's standard input; nil is none.
	Stdin io.Reader
	// ExtraFiles are passed to the child as descriptors 3, 4, ... (exec.Cmd.ExtraFiles): the
	// listening sockets of a socket-activated child, for one.
	ExtraFiles []*os.File
	// OnLine, when set, is called with each line the child writes to standard output, in order,
	// from the goroutine that reads them.
	OnLine func(line string)
	// Group starts the child in a process group of its own, as under a terminal or systemd, so
	// that SignalGroup, Kill and cleanup reach everything it started.
	Group bool
	// Stop, when set, is the signal cleanup sends first; the child then has Grace (10 s when 0)
	// to exit before it is killed. Unset: cleanup kills at once.
	Stop  os.Signal
	Grace time.Duration
}

// Proc is a started child process. Its output is kept and logged when the test fails. Its
// methods are safe for concurrent use; it must not be copied.
type Proc struct {
	name string
	cmd  *exec.Cmd
	opts Options

	stdout, stderr, output Buffer

	mu    sync.Mutex
	lines []string // standard output, line by line

	done   chan struct{}
	exited atomic.Bool // set just before done is closed
	err    error       // cmd.Wait's answer, valid once done is closed
}

// Start runs bin with args, named name in failure messages. The child gets SIGKILL if the test
// binary dies first, and is ended at the test's cleanup (see Options.Stop).
func Start(t testing.TB, name string, opts Options, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{name: name, opts: opts, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdin, p.cmd.ExtraFiles = opts.Env, opts.Dir, opts.Stdin, opts.ExtraFiles
	p.cmd.Stderr = io.MultiWriter(&p.stderr, &p.output)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: opts.Group}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go p.read(stdout)
	t.Cleanup(func() {
		p.end()
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.Output())
		}
	})
	return p
}

// read copies standard output line by line until it ends, then reaps the child (Wait must come
// after the last read of the pipe).
func (p *Proc) read(stdout io.Reader) {
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			_, _ = p.stdout.Write([]byte(line))
			_, _ = p.output.Write([]byte(line))
			line = strings.TrimSuffix(line, "\n")
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if p.opts.OnLine != nil {
				p.opts.OnLine(line)
			}
		}
		if err != nil {
			break
		}
	}
	p.err = p.cmd.Wait()
	p.exited.Store(true)
	close(p.done)
}

// end stops the child at cleanup: Options.Stop first when set, then SIGKILL, each to the whole
// group with Options.Group.
func (p *Proc) end() {
	if p.Exited() {
		return
	}
	if p.opts.Stop != nil {
		_ = p.send(p.opts.Stop)
		grace := p.opts.Grace
		if grace == 0 {
			grace = 10 * time.Second
		}
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	p.Kill()
}

func (p *Proc) send(sig os.Signal) error {
	if s, ok := sig.(syscall.Signal); ok && p.opts.Group {
		return syscall.Kill(-p.cmd.Process.Pid, s)
	}
	return p.cmd.Process.Signal(sig)
}

// Signal sends sig to the child alone; SignalGroup sends it to the child's whole process group
// (Options.Group), as a terminal's Ctrl-C does. Either fails the test when the signal cannot be
// sent (the child is gone).
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

func (p *Proc) SignalGroup(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("signal %s to %s's group: %v", sig, p.name, err)
	}
}

// Kill ends the child (its whole group with Options.Group) and waits until it is reaped.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.send(syscall.SIGKILL)
		<-p.done
	}
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and its output is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited says whether the child has exited.
func (p *Proc) Exited() bool { return p.exited.Load() }

// Err is the child's exit error (nil for status 0); valid once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Stdout, Stderr and Output (both, interleaved as written) return the child's output so far.
func (p *Proc) Stdout() string { return p.stdout.String() }
func (p *Proc) Stderr() string { return p.stderr.String() }
func (p *Proc) Output() string { return p.output.String() }

// ExitCode waits up to timeout for the child to exit and returns its exit status (-1 when a
// signal ended it); the test fails when it is still running then.
func (p *Proc) ExitCode(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s; output:\n%s", p.name, timeout, p.Output())
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// WaitFor is the package's WaitFor that also fails as soon as the child exits without cond
// holding, with the child's output in the message.
func (p *Proc) WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return WaitFor(t, timeout, what, func() bool {
		if cond() {
			return true
		}
		if p.Exited() && !cond() {
			t.Fatalf("%s exited before %s: %v; output:\n%s", p.name, what, p.err, p.Output())
		}
		return false
	})
}

// WaitOutput waits up to timeout for the child's output to contain s. What a child logs reaches
// the test through a pipe, so it can come after what the child did meanwhile (an answer on a
// socket): a test that saw the effect waits for the log line rather than reading it at once.
func (p *Proc) WaitOutput(t testing.TB, timeout time.Duration, what, s string) {
	t.Helper()
	p.WaitFor(t, timeout, what, func() bool { return strings.Contains(p.Output(), s) })
}

// WaitLine waits up to timeout for a line of standard output that starts with prefix and
// returns the rest of it, e.g. the address after "listening ".
func (p *Proc) WaitLine(t testing.TB, timeout time.Duration, prefix string) string {
	t.Helper()
	var rest string
	p.WaitFor(t, timeout, p.name+" to print "+strconv.Quote(prefix), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, l := range p.lines {
			if r, ok := strings.CutPrefix(l, prefix); ok {
				rest = r
				return true
			}
		}
		return false
	})
	return rest
}

// startTimeout bounds how long StartServer waits for a server's "listening" line; a race-built
// child on a loaded 2-core machine takes seconds.
const startTimeout = 30 * time.Second

// StartServer starts a server program (the example backend, a test's own child) that writes
// "listening <addr>" to standard output once it accepts connections, as Start does, and
// returns it with that address.
func StartServer(t testing.TB, name string, opts Options, bin string, args ...string) (*Proc, string) {
	t.Helper()
	p := Start(t, name, opts, bin, args...)
	return p, p.WaitLine(t, startTimeout, "listening ")
}
