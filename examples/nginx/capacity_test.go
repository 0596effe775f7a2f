package nginx

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

// TestNginxCapacity renders the example with --capacity 1 and runs the real nginx (no fcgiwrap
// needed): while one request is in progress — a large file its client does not read — the next
// one is refused with 503, X-Pool-Full and Retry-After before anything is served, /pool is
// never limited, and once the first request is gone the next one is served.
func TestNginxCapacity(t *testing.T) {
	nginx, ok := lookPath("nginx")
	if !ok {
		t.Skip("nginx not installed (CI installs it)")
	}
	prefix := filepath.Join(t.TempDir(), "p")
	addr := testproc.FreeAddr(t)
	if out, err := exec.Command("./run.sh", "render", "--prefix", prefix, "--listen", addr, "--capacity", "1").CombinedOutput(); err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
	big := make([]byte, 32<<20)
	if err := os.WriteFile(filepath.Join(prefix, "html", "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, "nginx", testproc.Options{Stop: syscall.SIGTERM}, nginx,
		"-p", prefix, "-c", filepath.Join(prefix, "conf", "nginx.conf"), "-g", "daemon off; error_log stderr notice;")
	get := func(path string) (*http.Response, error) {
		resp, err := http.Get("http://" + addr + path)
		if err == nil {
			_ = resp.Body.Close()
		}
		return resp, err
	}
	p.WaitFor(t, 20*time.Second, "nginx to answer", func() bool {
		resp, err := get("/pool")
		return err == nil && resp.StatusCode == http.StatusOK
	})

	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := hold.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	if _, err := hold.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var refused *http.Response
	p.WaitFor(t, 20*time.Second, "the second request to be refused", func() bool {
		resp, err := get("/")
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			return false
		}
		refused = resp
		return true
	})
	if refused.Header.Get("X-Pool-Full") == "" || refused.Header.Get("Retry-After") != "1" {
		t.Errorf("refusal headers %v, want X-Pool-Full and Retry-After: 1", refused.Header)
	}
	if resp, err := get("/pool"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /pool while full: %v %v, want 200 (never limited)", resp, err)
	}
	_ = hold.Close()
	p.WaitFor(t, 20*time.Second, "a request to be served once the first one is gone", func() bool {
		resp, err := get("/")
		return err == nil && resp.StatusCode == http.StatusOK
	})
}
