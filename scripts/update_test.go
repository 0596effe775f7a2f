package scripts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const updateScript = "pollbal-update.sh"

// files are one test's temporary pool, lock and marker files.
type files struct{ dir, pool, lock, marker string }

func newFiles(t *testing.T) files {
	t.Helper()
	dir := t.TempDir()
	f := files{dir: dir, pool: filepath.Join(dir, "pool"), lock: filepath.Join(dir, "lock"), marker: filepath.Join(dir, "marker")}
	writeFile(t, f.pool, "web serving v1\n")
	return f
}

// recordCmd is an update command that appends the pool file's content at that moment to
// the marker file, one "update saw [...]" line per run.
func (f files) recordCmd() string {
	return fmt.Sprintf(`{ printf 'update saw ['; cat "$POLLBAL_POOL_FILE"; printf ']\n'; } >> %q`, f.marker)
}

// wantUpdatedOnce checks a completed update: the pool file serves v2, and the update command
// ran once, while the pool file was empty.
func (f files) wantUpdatedOnce(t *testing.T) {
	t.Helper()
	if got := readFile(t, f.pool); got != "web serving v2\n" {
		t.Errorf("pool file = %q, want %q", got, "web serving v2\n")
	}
	if got := readFile(t, f.marker); got != "update saw []\n" {
		t.Errorf("update command saw %q, want one run with an empty pool file", got)
	}
}

// args are the fast-timing flags; overrides replace or add "--flag value" pairs.
func (f files) args(overrides ...string) []string {
	set := map[string]string{
		"--pool-file": f.pool, "--lock-file": f.lock, "--service": "web",
		"--version": "v1", "--new-version": "v2", "--update-cmd": f.recordCmd(),
		"--jitter": "0.05", "--lock-window": "1", "--announce-wait": "0.3", "--drain-wait": "0.1",
		"--rounds": "1",
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		set[overrides[i]] = overrides[i+1]
	}
	var out []string
	for k, v := range set {
		out = append(out, k, v)
	}
	return out
}

func TestUpdateCompletesWithoutLock(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	p := start(t, cleanEnv(), updateScript, f.args("--announce-wait", "1", "--drain-wait", "0.3")...)

	p.WaitFor(t, 10*time.Second, "leaving announced", func() bool { return readFile(t, f.pool) == "web leaving v1\n" })
	exitsZero(t, p, 15*time.Second)
	f.wantUpdatedOnce(t)
	log := p.Stderr()
	steps := []string{"announced 'web leaving v1'", "emptied pool file", "running update command", "updated; wrote 'web serving v2'"}
	last := -1
	for _, s := range steps {
		i := strings.Index(log, s)
		if i < 0 || i < last {
			t.Fatalf("log step %q missing or out of order:\n%s", s, log)
		}
		last = i
	}
	if strings.Contains(log, "starting over") {
		t.Errorf("started over without a lock:\n%s", log)
	}
}

func TestUpdateWaitsWhileLockFresh(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	touch(t, f.lock)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				touch(t, f.lock)
			}
		}
	}()
	p := start(t, cleanEnv(), updateScript, f.args()...)

	// While the lock stays fresh the script must keep starting over and never announce.
	p.WaitFor(t, 15*time.Second, "three start-overs", func() bool {
		if got := readFile(t, f.pool); got != "web serving v1\n" {
			t.Fatalf("pool file = %q while the lock is fresh", got)
		}
		return strings.Count(p.Stderr(), "pool warning active; starting over") >= 3
	})
	close(stop)
	<-stopped
	exitsZero(t, p, 15*time.Second)
	f.wantUpdatedOnce(t)
	if n := strings.Count(p.Stderr(), "announced 'web leaving v1'"); n != 1 {
		t.Errorf("announced %d times, want 1:\n%s", n, p.Stderr())
	}
}

func TestUpdateLockDuringAnnounceStartsOver(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	p := start(t, cleanEnv(), updateScript, f.args("--announce-wait", "1", "--lock-window", "2")...)

	p.WaitFor(t, 10*time.Second, "leaving announced", func() bool { return readFile(t, f.pool) == "web leaving v1\n" })
	touch(t, f.lock)
	p.WaitFor(t, 10*time.Second, "serving written back", func() bool { return readFile(t, f.pool) == "web serving v1\n" })
	if got := readFile(t, f.marker); got != "" {
		t.Fatalf("update ran although the lock was touched during announce: %q", got)
	}
	exitsZero(t, p, 20*time.Second)
	log := p.Stderr()
	if !strings.Contains(log, "pool warning during announce; wrote 'web serving v1' back; starting over") {
		t.Errorf("no start-over logged:\n%s", log)
	}
	if n := strings.Count(log, "announced 'web leaving v1'"); n != 2 {
		t.Errorf("announced %d times, want 2 (once interrupted, once completed)", n)
	}
	f.wantUpdatedOnce(t)
}

func TestUpdateSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		sig       syscall.Signal
		overrides []string
		waitLog   string // signal once stderr contains this
		wantPool  string
	}{
		{
			name: "SIGTERM while leaving restores serving", sig: syscall.SIGTERM,
			overrides: []string{"--announce-wait", "30"}, waitLog: "announced 'web leaving v1'",
			wantPool: "web serving v1\n",
		},
		{
			name: "SIGINT while leaving restores serving", sig: syscall.SIGINT,
			overrides: []string{"--announce-wait", "30"}, waitLog: "announced 'web leaving v1'",
			wantPool: "web serving v1\n",
		},
		{
			name: "SIGTERM while drained restores serving", sig: syscall.SIGTERM,
			overrides: []string{"--drain-wait", "30"}, waitLog: "emptied pool file",
			wantPool: "web serving v1\n",
		},
		{
			name: "SIGTERM before announcing leaves the file alone", sig: syscall.SIGTERM,
			overrides: []string{"--jitter", "30"}, waitLog: "sleeping",
			wantPool: "web serving v1\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFiles(t)
			p := start(t, cleanEnv(), updateScript, f.args(tc.overrides...)...)
			p.WaitFor(t, 10*time.Second, tc.waitLog, func() bool { return strings.Contains(p.Stderr(), tc.waitLog) })
			p.Signal(t, tc.sig)
			// Well under the 30 s sleeps: the signal must interrupt them.
			exitsZero(t, p, 10*time.Second)
			if got := readFile(t, f.pool); got != tc.wantPool {
				t.Errorf("pool file = %q, want %q", got, tc.wantPool)
			}
			if got := readFile(t, f.marker); got != "" {
				t.Errorf("update ran: %q", got)
			}
		})
	}

	t.Run("SIGTERM during the update lets it finish", func(t *testing.T) {
		t.Parallel()
		f := newFiles(t)
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		cmd := fmt.Sprintf(`touch %q; while [ ! -e %q ]; do sleep 0.02; done`, started, release)
		p := start(t, cleanEnv(), updateScript, f.args("--update-cmd", cmd)...)
		p.WaitFor(t, 10*time.Second, "update started", func() bool { _, err := os.Stat(started); return err == nil })
		p.Signal(t, syscall.SIGTERM)
		writeFile(t, release, "")
		exitsZero(t, p, 10*time.Second)
		if got := readFile(t, f.pool); got != "web serving v2\n" {
			t.Errorf("pool file = %q, want the updated version serving", got)
		}
	})
	// Regression: Ctrl-C, timeout(1) and systemd signal the whole process group; the update
	// command died with the script, which then wrote the old version back over a half-applied
	// update and exited 1.
	t.Run("SIGTERM to the process group during the update lets it finish", func(t *testing.T) {
		t.Parallel()
		f := newFiles(t)
		started, release, finished := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release"), filepath.Join(f.dir, "finished")
		cmd := fmt.Sprintf(`touch %q; while [ ! -e %q ]; do sleep 0.02; done; touch %q`, started, release, finished)
		p := start(t, cleanEnv(), updateScript, f.args("--update-cmd", cmd)...)
		p.WaitFor(t, 10*time.Second, "update started", func() bool { _, err := os.Stat(started); return err == nil })
		p.SignalGroup(t, syscall.SIGTERM)
		writeFile(t, release, "")
		exitsZero(t, p, 10*time.Second)
		if _, err := os.Stat(finished); err != nil {
			t.Errorf("the update command did not finish: %v", err)
		}
		if got := readFile(t, f.pool); got != "web serving v2\n" {
			t.Errorf("pool file = %q, want the updated version serving", got)
		}
	})
}

func TestUpdateCommandFailureRestoresOldVersion(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	p := start(t, cleanEnv(), updateScript, f.args("--update-cmd", "exit 3")...)
	if code := p.ExitCode(t, 15*time.Second); code == 0 {
		t.Fatalf("exit = 0 after a failed update; stderr:\n%s", p.Stderr())
	}
	if got := readFile(t, f.pool); got != "web serving v1\n" {
		t.Errorf("pool file = %q, want %q", got, "web serving v1\n")
	}
	if !strings.Contains(p.Stderr(), "update command failed with status 3") {
		t.Errorf("failure not logged:\n%s", p.Stderr())
	}
}

func TestUpdateFromEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		env        []string
		wantPool   string
		wantMarker string
	}{
		{
			name:       "two rounds, version carried over",
			env:        []string{"POLLBAL_VERSION=v1", "POLLBAL_NEW_VERSION=v2", "POLLBAL_ROUNDS=2"},
			wantPool:   "web serving v2\n",
			wantMarker: "update saw []\nupdate saw []\n",
		},
		{
			name:       "unversioned, new version defaults to the current one",
			env:        []string{"POLLBAL_ROUNDS=1"},
			wantPool:   "web serving\n",
			wantMarker: "update saw []\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFiles(t)
			env := cleanEnv(append([]string{
				"POLLBAL_POOL_FILE=" + f.pool, "POLLBAL_LOCK_FILE=" + f.lock, "POLLBAL_SERVICE=web",
				"POLLBAL_UPDATE_CMD=" + f.recordCmd(), "POLLBAL_JITTER=0", "POLLBAL_LOCK_WINDOW=1",
				"POLLBAL_ANNOUNCE_WAIT=0.1", "POLLBAL_DRAIN_WAIT=0.1",
			}, tc.env...)...)
			p := start(t, env, updateScript)
			exitsZero(t, p, 15*time.Second)
			if got := readFile(t, f.pool); got != tc.wantPool {
				t.Errorf("pool file = %q, want %q", got, tc.wantPool)
			}
			if got := readFile(t, f.marker); got != tc.wantMarker {
				t.Errorf("marker = %q, want %q", got, tc.wantMarker)
			}
		})
	}
}

func TestUpdateHelpAndUsage(t *testing.T) {
	t.Parallel()
	t.Run("--help documents every flag and variable", func(t *testing.T) {
		p := start(t, cleanEnv(), updateScript, "--help")
		if code := p.ExitCode(t, 10*time.Second); code != 0 {
			t.Fatalf("exit = %d", code)
		}
		help := p.Stdout()
		for _, want := range []string{
			"--pool-file", "POLLBAL_POOL_FILE", "--lock-file", "POLLBAL_LOCK_FILE", "--service", "POLLBAL_SERVICE",
			"--version", "POLLBAL_VERSION", "--new-version", "POLLBAL_NEW_VERSION", "--update-cmd", "POLLBAL_UPDATE_CMD",
			"--jitter", "POLLBAL_JITTER", "--lock-window", "POLLBAL_LOCK_WINDOW", "--announce-wait", "POLLBAL_ANNOUNCE_WAIT",
			"--drain-wait", "POLLBAL_DRAIN_WAIT", "--rounds", "POLLBAL_ROUNDS",
		} {
			if !strings.Contains(help, want) {
				t.Errorf("--help does not mention %s", want)
			}
		}
	})
	tests := []struct {
		name string
		args []string
	}{
		{name: "missing pool file", args: []string{"--lock-file", "/x", "--service", "web"}},
		{name: "missing service", args: []string{"--pool-file", "/x", "--lock-file", "/y"}},
		{name: "unknown flag", args: []string{"--pool-file", "/x", "--lock-file", "/y", "--service", "web", "--bogus", "1"}},
		{name: "flag without value", args: []string{"--pool-file"}},
		{name: "bad seconds", args: []string{"--pool-file", "/x", "--lock-file", "/y", "--service", "web", "--jitter", "1s"}},
		{name: "bad rounds", args: []string{"--pool-file", "/x", "--lock-file", "/y", "--service", "web", "--rounds=-1"}},
		{name: "bad service", args: []string{"--pool-file", "/x", "--lock-file", "/y", "--service", "-web"}},
		{name: "bad version", args: []string{"--pool-file", "/x", "--lock-file", "/y", "--service", "web", "--version", "v 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, cleanEnv(), updateScript, tc.args...)
			if code := p.ExitCode(t, 10*time.Second); code != 2 {
				t.Fatalf("exit = %d, want 2; stderr:\n%s", code, p.Stderr())
			}
		})
	}
}
