package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testproc"
)

// buildBackend compiles this command into a temporary directory.
func buildBackend(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "backend")
	if err := testproc.GoBuild(bin, ".", false); err != nil {
		t.Fatal(err)
	}
	return bin
}

// proc is one running backend process.
type proc struct {
	*testproc.Proc
	addr string
}

// startBackend starts bin with args and waits for its "listening" line, which must be its first.
// The process is stopped with SIGTERM at cleanup unless the test already stopped it.
func startBackend(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{}
	p.Proc, p.addr = testproc.StartServer(t, "backend", testproc.Options{Stop: syscall.SIGTERM}, bin, args...)
	if first, _, _ := strings.Cut(p.Stdout(), "\n"); first != "listening "+p.addr {
		t.Fatalf("first stdout line = %q, want \"listening <addr>\"", first)
	}
	return p
}

// stop sends sig and returns the exit code.
func (p *proc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	p.Signal(t, sig)
	return p.ExitCode(t, 15*time.Second)
}

func (p *proc) url(path string) string { return "http://" + p.addr + path }

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func getStats(t *testing.T, p *proc) api.Stats {
	t.Helper()
	resp, body := get(t, p.url("/_backend/stats"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stats status = %d", resp.StatusCode)
	}
	var s api.Stats
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("stats body %q: %v", body, err)
	}
	return s
}

func postWarning(t *testing.T, p *proc, body string, hdr map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url("/pool_warning"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestBackendProcess(t *testing.T) {
	bin := buildBackend(t)

	t.Run("pool file served, missing file is empty", func(t *testing.T) {
		dir := t.TempDir()
		pool := filepath.Join(dir, "pool")
		p := startBackend(t, bin, "-listen", "127.0.0.1:0", "-id", "b1", "-pool-file", pool)

		tests := []struct {
			name     string
			content  *string
			wantBody string
		}{
			{name: "missing file answers empty", content: nil, wantBody: ""},
			{name: "file content answered verbatim", content: ptr("web serving v1\n# c\napi leaving\n"), wantBody: "web serving v1\n# c\napi leaving\n"},
			{name: "empty file answers empty", content: ptr(""), wantBody: ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_ = os.Remove(pool)
				if tc.content != nil {
					if err := os.WriteFile(pool, []byte(*tc.content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				resp, body := get(t, p.url("/pool"))
				if resp.StatusCode != http.StatusOK || body != tc.wantBody {
					t.Fatalf("GET /pool = %d %q, want 200 %q", resp.StatusCode, body, tc.wantBody)
				}
			})
		}
		if s := getStats(t, p); s.Requests != 0 {
			t.Errorf("requests = %d after only /pool and stats, want 0", s.Requests)
		}
	})

	t.Run("other paths answer id and are counted", func(t *testing.T) {
		p := startBackend(t, bin, "-listen", "127.0.0.1:0", "-id", "web-7")
		for _, path := range []string{"/", "/a/b?x=1"} {
			resp, body := get(t, p.url(path))
			if resp.StatusCode != http.StatusOK || body != "web-7\n" || resp.Header.Get("X-Backend-Id") != "web-7" {
				t.Fatalf("GET %s = %d %q id=%q", path, resp.StatusCode, body, resp.Header.Get("X-Backend-Id"))
			}
		}
		s := getStats(t, p)
		if s.ID != "web-7" || s.Requests != 2 || s.InFlight != 0 || s.PeakInFlight != 1 {
			t.Fatalf("stats = %+v, want id web-7, 2 requests, 0 in flight, peak 1", s)
		}
	})

	t.Run("default id is the bound address", func(t *testing.T) {
		p := startBackend(t, bin, "-listen", "127.0.0.1:0")
		_, body := get(t, p.url("/"))
		if body != p.addr+"\n" {
			t.Fatalf("body = %q, want %q", body, p.addr+"\n")
		}
	})

	t.Run("delay tracks in-flight and peak", func(t *testing.T) {
		p := startBackend(t, bin, "-listen", "127.0.0.1:0", "-id", "slow", "-delay", "2s")
		const n = 3
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(p.url("/slow"))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}()
		}
		p.WaitFor(t, 10*time.Second, fmt.Sprintf("in_flight to reach %d", n), func() bool { return getStats(t, p).InFlight == n })
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		s := getStats(t, p)
		if s.InFlight != 0 || s.PeakInFlight != n || s.Requests != n {
			t.Fatalf("stats = %+v, want 0 in flight, peak %d, %d requests", s, n, n)
		}
	})

	t.Run("pool_warning without secret touches lock", func(t *testing.T) {
		lock := filepath.Join(t.TempDir(), "lock")
		p := startBackend(t, bin, "-listen", "127.0.0.1:0", "-lock-file", lock)
		before := time.Now().Add(-time.Second)
		body := "web v1 serving=1 leaving=0 threshold=1 site=t\n"
		if code := postWarning(t, p, body, nil); code != http.StatusNoContent {
			t.Fatalf("POST /pool_warning = %d, want 204", code)
		}
		fi, err := os.Stat(lock)
		if err != nil {
			t.Fatalf("lock not created: %v", err)
		}
		if fi.ModTime().Before(before) {
			t.Fatalf("lock mtime %v not recent", fi.ModTime())
		}
		// An old lock is touched again (mtime moves forward).
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(lock, old, old); err != nil {
			t.Fatal(err)
		}
		if code := postWarning(t, p, body, nil); code != http.StatusNoContent {
			t.Fatalf("second POST = %d", code)
		}
		if fi, _ := os.Stat(lock); !fi.ModTime().After(old.Add(time.Minute)) {
			t.Fatalf("lock mtime not refreshed: %v", fi.ModTime())
		}
		s := getStats(t, p)
		if s.Warnings != 2 || s.LastWarning != body || s.Requests != 0 {
			t.Fatalf("stats = %+v, want 2 warnings, last %q, 0 requests", s, body)
		}
		resp, _ := get(t, p.url("/pool_warning"))
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET /pool_warning = %d, want 405", resp.StatusCode)
		}
	})

	t.Run("pool_warning with secret", func(t *testing.T) {
		dir := t.TempDir()
		secretFile := filepath.Join(dir, "secret")
		if err := os.WriteFile(secretFile, []byte("  topsecret \n"), 0o600); err != nil {
			t.Fatal(err)
		}
		lock := filepath.Join(dir, "lock")
		p := startBackend(t, bin, "-listen", "127.0.0.1:0", "-lock-file", lock, "-secret-file", secretFile)
		body := "web - serving=2 leaving=0 threshold=2 site=t\n"
		now := strconv.FormatInt(time.Now().Unix(), 10)
		old := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
		secret := []byte("topsecret")
		tests := []struct {
			name     string
			hdr      map[string]string
			wantCode int
		}{
			{name: "no headers", hdr: nil, wantCode: http.StatusUnauthorized},
			{name: "wrong secret", hdr: map[string]string{"X-Pollbal-Timestamp": now, "X-Pollbal-Signature": sign([]byte("nope"), now, body)}, wantCode: http.StatusUnauthorized},
			{name: "untrimmed secret", hdr: map[string]string{"X-Pollbal-Timestamp": now, "X-Pollbal-Signature": sign([]byte("  topsecret \n"), now, body)}, wantCode: http.StatusUnauthorized},
			{name: "stale timestamp", hdr: map[string]string{"X-Pollbal-Timestamp": old, "X-Pollbal-Signature": sign(secret, old, body)}, wantCode: http.StatusUnauthorized},
			{name: "valid", hdr: map[string]string{"X-Pollbal-Timestamp": now, "X-Pollbal-Signature": sign(secret, now, body)}, wantCode: http.StatusNoContent},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code := postWarning(t, p, body, tc.hdr)
				if code != tc.wantCode {
					t.Fatalf("POST = %d, want %d", code, tc.wantCode)
				}
				_, err := os.Stat(lock)
				if tc.wantCode != http.StatusNoContent && !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("lock touched by a rejected request (stat err %v)", err)
				}
				if tc.wantCode == http.StatusNoContent && err != nil {
					t.Fatalf("lock not touched: %v", err)
				}
			})
		}
		if s := getStats(t, p); s.Warnings != 1 {
			t.Fatalf("warnings = %d, want 1 (rejected ones not counted)", s.Warnings)
		}
	})

	t.Run("clean shutdown on signals", func(t *testing.T) {
		tests := []struct {
			name string
			sig  os.Signal
		}{
			{name: "SIGTERM", sig: syscall.SIGTERM},
			{name: "SIGINT", sig: syscall.SIGINT},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p := startBackend(t, bin, "-listen", "127.0.0.1:0")
				if code := p.stop(t, tc.sig); code != 0 {
					t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, p.Stderr())
				}
			})
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			want int
		}{
			{name: "missing listen", args: nil, want: 2},
			{name: "unknown flag", args: []string{"-listen", "127.0.0.1:0", "-nope"}, want: 2},
			{name: "empty secret file", args: []string{"-listen", "127.0.0.1:0", "-secret-file", os.DevNull}, want: 1},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				err := exec.Command(bin, tc.args...).Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != tc.want {
					t.Fatalf("exit = %v, want code %d", err, tc.want)
				}
			})
		}
	})
}

func ptr(s string) *string { return &s }

// sign computes an X-Pollbal-Signature independently of the code the backend verifies with, so
// that a bug shared by both sides cannot hide.
func sign(secret []byte, ts string, body string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "\n" + body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
