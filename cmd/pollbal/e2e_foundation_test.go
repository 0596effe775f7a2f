package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

const (
	e2eInterval = 250 * time.Millisecond
	e2eTimeout  = 150 * time.Millisecond
	// e2eObserve is the slack for seeing a change through /api/state: the 10 ms poll of it and
	// the GET itself, which a loaded 2-core machine running pollbal under -race can stretch by
	// hundreds of milliseconds.
	e2eObserve = 500 * time.Millisecond
)

// foundationConfig is three backends in the default pool behind one app.
func foundationConfig(addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: e2e
listen: LISTEN
admin:
  listen: ADMIN
poll:
  interval: %s
  timeout: %s
  max_backoff: 500ms
services:
  web:
    warning_threshold: 0
apps:
  - name: www
    hosts: ["*"]
backends:
`, e2eInterval, e2eTimeout)
	for i, a := range addrs {
		fmt.Fprintf(&b, "  - id: web-%d\n    address: %s\n    capacity: 8\n", i+1, a)
	}
	return b.String()
}

// TestEndToEndFoundation runs the real binary against three real example backends: pool-file
// edits, a killed and restarted backend, a garbage answer, and a SIGHUP with a broken config.
func TestEndToEndFoundation(t *testing.T) {
	var bs []*backend
	var addrs []string
	for i := 1; i <= 3; i++ {
		b := startBackend(t, fmt.Sprintf("web-%d", i), "127.0.0.1:0", "web serving v1\n")
		bs = append(bs, b)
		addrs = append(addrs, b.addr)
	}
	pb := startPollbal(t, foundationConfig(addrs))
	outer := t // processes started in subtests must outlive them
	testproc.WaitFor(t, 5*time.Second, "all three ready", func() bool {
		s := pb.state(t)
		for _, b := range bs {
			if ready, _, _, _ := s.backend(b.id); !ready {
				return false
			}
		}
		return true
	})

	t.Run("pool file edit visible within two intervals", func(t *testing.T) {
		bs[0].setPool(t, "web leaving v2\n")
		took := testproc.WaitFor(t, 5*time.Second, "web-1 leaving v2", func() bool {
			_, _, reports, _ := pb.state(t).backend("web-1")
			return reports == "web leaving v2"
		})
		if limit := 2*e2eInterval + e2eObserve; took > limit {
			t.Fatalf("edit took %s to show, want within two intervals (+ %s to observe it: %s)", took, e2eObserve, limit)
		}
	})

	t.Run("killed backend not ready within interval+timeout, ready again after restart", func(t *testing.T) {
		b := bs[1]
		addr := b.addr
		b.Kill()
		took := testproc.WaitFor(t, 5*time.Second, "web-2 not ready", func() bool {
			ready, _, _, _ := pb.state(t).backend("web-2")
			return !ready
		})
		if limit := e2eInterval + e2eTimeout + e2eObserve; took > limit {
			t.Fatalf("kill took %s to show, want within interval+timeout (+ %s to observe it: %s)", took, e2eObserve, limit)
		}
		_, reason, _, _ := pb.state(t).backend("web-2")
		if reason == "" {
			t.Fatal("not-ready backend has no reason")
		}
		b.start(outer, addr) // same port again
		testproc.WaitFor(t, 5*time.Second, "web-2 ready after restart", func() bool {
			ready, _, _, _ := pb.state(t).backend("web-2")
			return ready
		})
	})

	t.Run("garbage answer makes it not ready with a reason", func(t *testing.T) {
		bs[2].setPool(t, "web down v1\n")
		testproc.WaitFor(t, 5*time.Second, "web-3 not ready", func() bool {
			ready, reason, _, _ := pb.state(t).backend("web-3")
			return !ready && strings.Contains(reason, "down")
		})
		bs[2].setPool(t, "web serving v1\n")
		testproc.WaitFor(t, 5*time.Second, "web-3 ready again", func() bool {
			ready, _, _, _ := pb.state(t).backend("web-3")
			return ready
		})
	})

	t.Run("SIGHUP with a broken config keeps the old one", func(t *testing.T) {
		if !strings.Contains(pb.metrics(t), "pollbal_config_last_reload_successful 1") {
			t.Fatal("reload gauge is not 1 at start")
		}
		if err := os.WriteFile(pb.cfgPath, []byte("site: e2e\nbackends: [{address: nope}]\nbogus_key: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		pb.Signal(t, syscall.SIGHUP)
		testproc.WaitFor(t, 5*time.Second, "reload gauge 0", func() bool {
			return strings.Contains(pb.metrics(t), "pollbal_config_last_reload_successful 0")
		})
		s := pb.state(t)
		if len(s.Backends) != 3 {
			t.Fatalf("after a rejected reload: %d backends, want the old 3", len(s.Backends))
		}
		testproc.WaitFor(t, 5*time.Second, "backends still checked and ready", func() bool {
			s := pb.state(t)
			for _, b := range bs {
				if ready, _, _, _ := s.backend(b.id); !ready {
					return false
				}
			}
			return true
		})
		pb.WaitOutput(t, 5*time.Second, "the rejected reload's errors in the log", "reload rejected")
		// A valid config is applied: drop web-3.
		if err := os.WriteFile(pb.cfgPath, []byte(fillAddrs(foundationConfig(addrs[:2]), pb.listen, pb.admin)), 0o644); err != nil {
			t.Fatal(err)
		}
		pb.Signal(t, syscall.SIGHUP)
		testproc.WaitFor(t, 5*time.Second, "valid reload applied", func() bool {
			return len(pb.state(t).Backends) == 2 && strings.Contains(pb.metrics(t), "pollbal_config_last_reload_successful 1")
		})
	})

	t.Run("SIGTERM exits 0", func(t *testing.T) {
		pb.Signal(t, syscall.SIGTERM)
		if code := pb.ExitCode(t, 40*time.Second); code != 0 {
			t.Fatalf("exit code %d, want 0", code)
		}
	})
}

// fillAddrs replaces the LISTEN and ADMIN placeholders.
func fillAddrs(cfg, listen, admin string) string {
	return strings.ReplaceAll(strings.ReplaceAll(cfg, "LISTEN", listen), "ADMIN", admin)
}

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good.yaml"
	bad := dir + "/bad.yaml"
	if err := os.WriteFile(good, []byte(fillAddrs(foundationConfig([]string{"127.0.0.1:9001"}), "127.0.0.1:8080", "127.0.0.1:9090")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("site: x\nservices: {web: {}}\napps: [{name: a, hosts: ['*']}]\nbackends:\n  - address: 127.0.0.1\n  - address: 127.0.0.1:9001\n    capacity: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missingFiles := dir + "/files.yaml"
	corrupt := dir + "/state.json"
	if err := os.WriteFile(corrupt, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(missingFiles, []byte(fillAddrs(foundationConfig([]string{"127.0.0.1:9001"}), "127.0.0.1:8080", "127.0.0.1:9090")+
		"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withFiles, err := os.ReadFile(missingFiles)
	if err != nil {
		t.Fatal(err)
	}
	withFiles = []byte(strings.Replace(string(withFiles), "admin:\n  listen: 127.0.0.1:9090\n",
		"admin:\n  listen: 127.0.0.1:9090\n  token_file: "+dir+"/no-token\n  state_file: "+corrupt+"\n", 1) +
		"warning:\n  secret_file: " + dir + "/no-secret\n")
	if err := os.WriteFile(missingFiles, withFiles, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{name: "valid config prints ok", args: []string{"check", "-config", good}, wantCode: 0, want: []string{"ok"}},
		{name: "invalid config prints every problem", args: []string{"check", "-config", bad}, wantCode: 1,
			want: []string{"backends[0].address", "backends[1].capacity"}},
		{name: "version", args: []string{"version"}, wantCode: 0, want: []string{"pollbal "}},
		// Regression: check said ok for files that run then refused.
		{name: "files the config names are read too", args: []string{"check", "-config", missingFiles}, wantCode: 1,
			want: []string{"admin.token_file:", "admin.state_file:", "warning.secret_file:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			code := realMain(tc.args, &out, &errOut)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; out %q err %q", code, tc.wantCode, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("output %q lacks %q", out.String(), w)
				}
			}
		})
	}
}
