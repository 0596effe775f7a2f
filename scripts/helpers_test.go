package scripts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// cleanEnv is the test's environment without any POLLBAL_* variable, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POLLBAL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// start runs path with args; the process is killed at cleanup if still running.
func start(t *testing.T, env []string, path string, args ...string) *testproc.Proc {
	t.Helper()
	return startIn(t, env, "", path, args...)
}

// startIn is start with stdin as the process's standard input. The script runs in its own
// process group, as under a terminal or systemd, so a test can signal the whole group and
// cleanup ends the update command too.
func startIn(t *testing.T, env []string, stdin, path string, args ...string) *testproc.Proc {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return testproc.Start(t, filepath.Base(path), testproc.Options{Env: env, Stdin: strings.NewReader(stdin), Group: true}, abs, args...)
}

// exitsZero waits up to timeout for p to exit and fails the test, with p's standard error,
// unless it exited 0.
func exitsZero(t *testing.T, p *testproc.Proc, timeout time.Duration) {
	t.Helper()
	if code := p.ExitCode(t, timeout); code != 0 {
		t.Fatalf("exit = %d; stderr:\n%s", code, p.Stderr())
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// touch creates path or sets its mtime to now.
func touch(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	_ = f.Close()
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Error(err)
	}
}
