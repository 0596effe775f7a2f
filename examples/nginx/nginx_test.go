package nginx

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// lookPath finds a binary in PATH or the sbin directories run.sh also searches.
func lookPath(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// server is one run.sh process (nginx + fcgiwrap).
type server struct {
	*testproc.Proc
	addr string
}

// startServer runs run.sh on a free port, retrying when another process took the port
// between FreeAddr and nginx's bind. Cleanup stops it with SIGTERM, so that nginx and fcgiwrap
// go with it.
func startServer(t *testing.T, prefix, poolFile, lockFile string) *server {
	t.Helper()
	var last string
	for attempt := 0; attempt < 3; attempt++ {
		s := &server{addr: testproc.FreeAddr(t)}
		s.Proc = testproc.Start(t, "run.sh", testproc.Options{Stop: syscall.SIGTERM}, "./run.sh", "run",
			"--prefix", prefix, "--listen", s.addr, "--pool-file", poolFile, "--lock-file", lockFile)
		testproc.WaitFor(t, 20*time.Second, "nginx to answer on "+s.addr, func() bool {
			if s.Exited() {
				return true
			}
			resp, err := http.Get("http://" + s.addr + "/pool")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		})
		if !s.Exited() {
			return s
		}
		last = s.Output()
	}
	t.Fatalf("run.sh failed to start three times; last output:\n%s", last)
	return nil
}

func request(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	resp, err := http.DefaultClient.Do(req)
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

func TestNginxBackend(t *testing.T) {
	_, okNginx := lookPath("nginx")
	_, okFcgi := lookPath("fcgiwrap")
	if !okNginx || !okFcgi {
		t.Skip("nginx/fcgiwrap not installed (CI installs them)")
	}
	dir := t.TempDir()
	poolFile := filepath.Join(dir, "pool")
	lockFile := filepath.Join(dir, "lock")
	if err := os.WriteFile(poolFile, []byte("web serving v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "prefix"), poolFile, lockFile)
	base := "http://" + s.addr

	t.Run("GET /pool", func(t *testing.T) {
		tests := []struct {
			name    string
			content string
		}{
			{name: "serves the pool file", content: "web serving v1\n"},
			{name: "sees a replaced file at once", content: "web leaving v1\n"},
			{name: "empty file answers 200 empty", content: ""},
			{name: "several lines", content: "web serving v2\napi serving\n"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				tmp := poolFile + ".tmp"
				if err := os.WriteFile(tmp, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, poolFile); err != nil {
					t.Fatal(err)
				}
				resp, body := request(t, http.MethodGet, base+"/pool", "")
				if resp.StatusCode != http.StatusOK || body != tc.content {
					t.Fatalf("GET /pool = %d %q, want 200 %q", resp.StatusCode, body, tc.content)
				}
				if got := resp.Header.Get("Cache-Control"); got != "no-store" {
					t.Errorf("Cache-Control = %q, want no-store", got)
				}
				if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/plain") {
					t.Errorf("Content-Type = %q, want text/plain", got)
				}
			})
		}
	})

	t.Run("/pool_warning", func(t *testing.T) {
		tests := []struct {
			name      string
			method    string
			wantCode  int
			wantTouch bool
		}{
			{name: "GET is refused and does not touch", method: http.MethodGet, wantCode: http.StatusMethodNotAllowed},
			{name: "POST touches the lock", method: http.MethodPost, wantCode: http.StatusNoContent, wantTouch: true},
			{name: "POST again refreshes the lock", method: http.MethodPost, wantCode: http.StatusNoContent, wantTouch: true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				old := time.Now().Add(-time.Hour)
				if err := os.WriteFile(lockFile, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(lockFile, old, old); err != nil {
					t.Fatal(err)
				}
				body := "web v1 serving=1 leaving=0 threshold=1 site=test\n"
				resp, _ := request(t, tc.method, base+"/pool_warning", body)
				if resp.StatusCode != tc.wantCode {
					t.Fatalf("%s /pool_warning = %d, want %d; output:\n%s", tc.method, resp.StatusCode, tc.wantCode, s.Output())
				}
				fi, err := os.Stat(lockFile)
				if err != nil {
					t.Fatal(err)
				}
				touched := time.Since(fi.ModTime()) < time.Minute
				if touched != tc.wantTouch {
					t.Fatalf("lock touched = %v, want %v (mtime %v)", touched, tc.wantTouch, fi.ModTime())
				}
			})
		}
		t.Run("POST creates a missing lock", func(t *testing.T) {
			if err := os.Remove(lockFile); err != nil {
				t.Fatal(err)
			}
			resp, _ := request(t, http.MethodPost, base+"/pool_warning", "x\n")
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("POST = %d", resp.StatusCode)
			}
			if _, err := os.Stat(lockFile); err != nil {
				t.Fatalf("lock not created: %v", err)
			}
		})
	})

	t.Run("static files", func(t *testing.T) {
		resp, body := request(t, http.MethodGet, base+"/", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "pollbal example backend") {
			t.Fatalf("GET / = %d %q", resp.StatusCode, body)
		}
		resp, _ = request(t, http.MethodGet, base+"/missing.txt", "")
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET /missing.txt = %d, want 404", resp.StatusCode)
		}
	})

	t.Run("SIGTERM stops nginx and fcgiwrap", func(t *testing.T) {
		s.Signal(t, syscall.SIGTERM)
		if code := s.ExitCode(t, 15*time.Second); code != 0 {
			t.Fatalf("run.sh exit = %d; output:\n%s", code, s.Output())
		}
		testproc.WaitFor(t, 10*time.Second, "nginx to stop accepting after run.sh exited", func() bool {
			c, err := net.DialTimeout("tcp", s.addr, time.Second)
			if err != nil {
				return true
			}
			_ = c.Close()
			return false
		})
		if _, err := os.Stat(filepath.Join(dir, "prefix", "run", "fcgiwrap.sock")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("fcgiwrap socket left behind (stat err %v)", err)
		}
	})
}

// placeholder matches a template variable that run.sh failed to replace.
var placeholder = regexp.MustCompile(`@[A-Z_]+@`)

// TestRender needs neither nginx nor fcgiwrap: the template renders with every placeholder
// replaced.
func TestRender(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{
			name:     "defaults under the prefix",
			args:     []string{"--listen", "127.0.0.1:18081"},
			wantCode: 0,
			want:     []string{"listen 127.0.0.1:18081;", "/pool\";", "/lock\";", "pool-warning.cgi\";", "Cache-Control \"no-store\""},
		},
		{
			name:     "with a capacity",
			args:     []string{"--listen", "127.0.0.1:18081", "--capacity", "8"},
			wantCode: 0,
			want:     []string{"limit_conn inprogress 8; limit_conn_status 503; error_page 503 @full;", "add_header X-Pool-Full 1 always;"},
		},
		{name: "capacity not a number", args: []string{"--listen", "127.0.0.1:1", "--capacity", "8;"}, wantCode: 2},
		{name: "missing listen", args: nil, wantCode: 2},
		{name: "listen without port", args: []string{"--listen", "127.0.0.1"}, wantCode: 2},
		{name: "unknown flag", args: []string{"--listen", "127.0.0.1:1", "--nope", "x"}, wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := filepath.Join(t.TempDir(), "p")
			args := append([]string{"render", "--prefix", prefix}, tc.args...)
			out, err := exec.Command("./run.sh", args...).CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("run.sh render exit = %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			if tc.wantCode != 0 {
				return
			}
			conf, err := os.ReadFile(filepath.Join(prefix, "conf", "nginx.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if placeholder.Match(conf) {
				t.Errorf("unrendered placeholder left in:\n%s", conf)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(conf), w) {
					t.Errorf("rendered conf lacks %q", w)
				}
			}
			if fi, err := os.Stat(filepath.Join(prefix, "pool")); err != nil || fi.Size() != 0 {
				t.Errorf("pool file not created empty: %v", err)
			}
			if _, err := os.Stat(filepath.Join(prefix, "html", "index.html")); err != nil {
				t.Error(err)
			}
			if _, ok := lookPath("nginx"); ok {
				check := exec.Command("nginx", "-t", "-q", "-e", filepath.Join(prefix, "logs", "error.log"),
					"-p", prefix, "-c", filepath.Join(prefix, "conf", "nginx.conf"))
				check.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
				if out, err := check.CombinedOutput(); err != nil {
					t.Errorf("nginx -t: %v\n%s", err, out)
				}
			}
		})
	}
}
