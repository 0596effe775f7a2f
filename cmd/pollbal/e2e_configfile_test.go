package main

// End-to-end: only a regular file of at most 16 MiB is read as the configuration, by check, run
// and reloads; and a reload, whatever it waits for, never keeps SIGTERM from being obeyed.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// replaceWithFifo replaces the file at path by a named pipe that nobody writes into.
func replaceWithFifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Regression: `pollbal check` on a named pipe waited for a writer for good, on /dev/zero it ran
// out of memory, and on a 100 MB file it used up to 1 GB. Each is now refused at once with its
// reason, by `check` and by `run`.
func TestEndToEndCheckAndRunRefuseWhatIsNotAConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 17<<20); err != nil { // sparse: 17 MiB on no disk
		t.Fatal(err)
	}
	// In this order: before the rule, the named pipe blocked (and failed this test) before
	// /dev/zero could be read until memory ran out.
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"check on a named pipe", []string{"check", "-config", fifo}, fifo + ": not a regular file (a named pipe)"},
		{"run on a named pipe", []string{"run", "-config", fifo}, "not a regular file (a named pipe)"},
		{"check on a file over 16 MiB", []string{"check", "-config", big}, big + ": larger than 16 MiB (17825792 bytes)"},
		{"check on /dev/zero", []string{"check", "-config", "/dev/zero"}, "/dev/zero: not a regular file (a character device)"},
	}
	for _, tc := range cases {
		start := time.Now()
		p := testproc.Start(t, "pollbal "+tc.name, testproc.Options{}, bins.pollbal, tc.args...)
		code := p.ExitCode(t, 10*time.Second)
		took := time.Since(start)
		t.Logf("%s: exit %d after %s", tc.name, code, took.Round(time.Millisecond))
		if code != 1 || !strings.Contains(p.Output(), tc.want) {
			t.Fatalf("%s: exit %d, output %q; want 1 and %q", tc.name, code, p.Output(), tc.want)
		}
		if took > 5*time.Second {
			t.Errorf("%s took %s, want a prompt refusal", tc.name, took)
		}
	}
}

// Regression: with the config path swapped for a named pipe, SIGHUP froze reloads and SIGTERM
// was ignored until someone wrote into the pipe. The reload is now rejected as config_invalid at
// once, and SIGTERM is obeyed.
func TestEndToEndReloadOfANamedPipeThenShutdown(t *testing.T) {
	// A -race binary sleeps 1 s at exit unless told not to; the exit measured here is pollbal's.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	const shutdown = 3 * time.Second
	pb := startLimitsSetup(t, "{shutdown_timeout: 3s}")
	replaceWithFifo(t, pb.cfgPath)
	pb.Signal(t, syscall.SIGHUP)
	pb.WaitOutput(t, 10*time.Second, "the reload to be rejected", "not a regular file (a named pipe)")
	if !strings.Contains(pb.Output(), "reason=config_invalid") {
		t.Errorf("the rejection does not say config_invalid:\n%s", pb.Output())
	}
	if n := rejectedCount(t, pb, "config_invalid"); n != 1 {
		t.Errorf(`pollbal_config_reloads_rejected_total{reason="config_invalid"} = %v, want 1`, n)
	}
	if g := reloadGauge(t, pb); g != 0 {
		t.Errorf("pollbal_config_last_reload_successful = %v, want 0", g)
	}
	stopWithin(t, pb, shutdown, "after the rejected reload")
}

// stopWithin sends pollbal SIGTERM and wants it to exit 0 within shutdown, its
// shutdown_timeout; after says when, for the log.
func stopWithin(t *testing.T, pb *instance, shutdown time.Duration, after string) {
	t.Helper()
	start := time.Now()
	pb.Signal(t, syscall.SIGTERM)
	code := pb.ExitCode(t, 15*time.Second)
	took := time.Since(start)
	t.Logf("SIGTERM %s: exit %d after %s", after, code, took.Round(time.Millisecond))
	if code != 0 || took > shutdown {
		t.Errorf("exit %d after %s, want 0 within shutdown_timeout (%s)", code, took, shutdown)
	}
}

// Regression: with warning.secret_file swapped for a named pipe nobody writes into, a reload
// waited in its read until SIGTERM. The reload is now rejected as config_invalid at once, naming
// the key and the path, and nothing of it is applied.
func TestEndToEndReloadOfANamedPipeSecretIsRejected(t *testing.T) {
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
warning: {secret_file: %s}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends:
  - {id: web-1, address: %s}
`, secret, be.addr)
	pb := startPollbal(t, cfg)
	// The rejected reload would also add a backend: it must not show.
	writeInPlace(t, pb.cfgPath, fillAddrs(cfg, pb.listen, pb.admin)+"  - {id: web-2, address: "+be.addr[:strings.LastIndex(be.addr, ":")]+":1}\n")
	replaceWithFifo(t, secret)
	pb.Signal(t, syscall.SIGHUP)
	pb.WaitOutput(t, 10*time.Second, "the reload to be rejected", "warning.secret_file: "+secret+": not a regular file (a named pipe)")
	if n := rejectedCount(t, pb, "config_invalid"); n != 1 {
		t.Errorf(`pollbal_config_reloads_rejected_total{reason="config_invalid"} = %v, want 1`, n)
	}
	if got := backendSet(t, pb); len(got) != 1 {
		t.Errorf("backends after the rejected reload: %v, want web-1 alone", got)
	}
}

// A reload can still wait on a file: here it changes access_log.path to a named pipe that
// nobody reads, so opening it for writing blocks (a pipe is a fair access log once its reader
// is there). SIGTERM is still obeyed within shutdown_timeout, and nothing of the reload is
// applied meanwhile.
func TestEndToEndShutdownWhileAReloadIsBlocked(t *testing.T) {
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	const shutdown = 3 * time.Second
	be := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	fifo := filepath.Join(t.TempDir(), "access.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
proxy: {shutdown_timeout: 3s}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends:
  - {id: web-1, address: %s}
`, be.addr)
	pb := startPollbal(t, cfg)
	// The reload that blocks would also add a backend: it must not show.
	next := strings.Replace(fillAddrs(cfg, pb.listen, pb.admin), "services:", "access_log: {path: "+fifo+"}\nservices:", 1)
	writeInPlace(t, pb.cfgPath, next+"  - {id: web-2, address: "+be.addr[:strings.LastIndex(be.addr, ":")]+":1}\n")
	pb.Signal(t, syscall.SIGHUP)
	// Opening the pipe ourselves would let the reload go on, so the wait looks at pollbal's
	// threads instead: one sleeps in the kernel's wait for the pipe's other end.
	testproc.WaitFor(t, 15*time.Second, "the reload to block opening the access log", func() bool {
		return threadWaitsIn(t, pb.Pid(), "wait_for_partner")
	})
	if got := backendSet(t, pb); len(got) != 1 {
		t.Errorf("backends while the reload is blocked: %v, want web-1 alone", got)
	}
	stopWithin(t, pb, shutdown, "with a reload blocked opening a file")
	if strings.Contains(pb.Output(), "configuration reloaded") {
		t.Errorf("the blocked reload was applied:\n%s", pb.Output())
	}
}

// threadWaitsIn says whether a thread of process pid sleeps in the kernel function fn (its
// /proc wchan).
func threadWaitsIn(t *testing.T, pid int, fn string) bool {
	t.Helper()
	wchans, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range wchans {
		if b, err := os.ReadFile(p); err == nil && string(b) == fn {
			return true
		}
	}
	return false
}
