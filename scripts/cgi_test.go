package scripts

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const cgiScript = "pool-warning.cgi"

func TestPoolWarningCGI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		lockInDir  bool // false: the lock's directory does not exist
		wantStatus string
		wantLock   bool
	}{
		{name: "POST touches the lock", method: "POST", lockInDir: true, wantStatus: "Status: 204 No Content", wantLock: true},
		{name: "GET is 405", method: "GET", lockInDir: true, wantStatus: "Status: 405 Method Not Allowed"},
		{name: "missing method is 405", method: "", lockInDir: true, wantStatus: "Status: 405 Method Not Allowed"},
		{name: "unwritable lock is 500", method: "POST", lockInDir: false, wantStatus: "Status: 500 Internal Server Error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			lock := filepath.Join(dir, "lock")
			if !tc.lockInDir {
				lock = filepath.Join(dir, "missing", "lock")
			}
			body := "web v1 serving=1 leaving=0 threshold=1 site=t\n"
			env := cleanEnv("POLLBAL_LOCK_FILE="+lock, "CONTENT_LENGTH="+strconv.Itoa(len(body)))
			if tc.method != "" {
				env = append(env, "REQUEST_METHOD="+tc.method)
			}
			p := startIn(t, env, body, cgiScript)
			exitsZero(t, p, 10*time.Second)
			out := p.Stdout()
			if first, _, _ := strings.Cut(out, "\r\n"); first != tc.wantStatus {
				t.Errorf("first line = %q, want %q (output %q)", first, tc.wantStatus, out)
			}
			if !strings.Contains(out, "\r\n\r\n") {
				t.Errorf("no end of headers in %q", out)
			}
			_, err := os.Stat(lock)
			if gotLock := err == nil; gotLock != tc.wantLock {
				t.Errorf("lock exists = %v, want %v", gotLock, tc.wantLock)
			}
		})
	}

	t.Run("POST refreshes an old lock", func(t *testing.T) {
		t.Parallel()
		lock := filepath.Join(t.TempDir(), "lock")
		writeFile(t, lock, "")
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(lock, old, old); err != nil {
			t.Fatal(err)
		}
		p := start(t, cleanEnv("POLLBAL_LOCK_FILE="+lock, "REQUEST_METHOD=POST"), cgiScript)
		if code := p.ExitCode(t, 10*time.Second); code != 0 {
			t.Fatalf("exit = %d", code)
		}
		fi, err := os.Stat(lock)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(fi.ModTime()) > time.Minute {
			t.Fatalf("lock mtime %v not refreshed", fi.ModTime())
		}
	})
}
