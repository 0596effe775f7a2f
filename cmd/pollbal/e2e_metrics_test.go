package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"pollbal/internal/testproc"
)

// specMetrics are the metric names of SPEC §6.
var specMetrics = []string{
	"pollbal_backend_ready", "pollbal_backend_in_flight", "pollbal_checks_total",
	"pollbal_check_duration_seconds", "pollbal_group_serving", "pollbal_group_leaving",
	"pollbal_warnings_sent_total", "pollbal_warning_errors_total", "pollbal_pool_exhausted_total",
	"pollbal_pool_fallback_total", "pollbal_requests_total", "pollbal_request_duration_seconds",
	"pollbal_config_last_reload_successful", "pollbal_reports_ignored_total",
	// SPEC §8
	"pollbal_client_connections", "pollbal_accept_errors_total", "pollbal_client_timeouts_total",
	"pollbal_client_connections_refused_total",
	"pollbal_config_reloads_rejected_total",
	// SPEC §9.1
	"pollbal_backend_limit", "pollbal_backend_full_total", "pollbal_load_report_errors_total",
	// SPEC §9.2
	"pollbal_store_up",
	// SPEC §10
	"pollbal_queue_length", "pollbal_queue_wait_seconds",
	// SPEC §8.1
	"pollbal_backend_errors_total", "pollbal_responses_total", "pollbal_tls_handshake_errors_total",
	"pollbal_client_gone_total",
	// SPEC §11
	"pollbal_access_log_dropped_total", "pollbal_access_log_errors_total",
}

// TestEndToEndMetrics scrapes the real binary's /metrics after traffic that exercises every
// SPEC metric (served, exhausted and fallback requests, sent and failed warnings) and checks
// each name is present and the exposition passes promlint.
func TestEndToEndMetrics(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("only-the-backend-knows\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// web-1 also reports a service the configuration does not declare: that line is ignored
	// and counted.
	ok := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\nmail serving v1\n")
	// web-2 demands signed warnings that this pollbal cannot sign: every warning to it fails.
	strict := startBackend(t, "web-2", "127.0.0.1:0", "web serving v1\n", "-secret-file", secret)
	pb := startPollbal(t, fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {warning_threshold: 5}}
apps:
  - {name: www, hosts: ["*"]}
  - {name: ghost, hosts: ["ghost.test"], pool: pool-ghost}
  - {name: blog, hosts: ["blog.test"], owner: nobody}
backends:
  - {id: web-1, address: %s}
  - {id: web-2, address: %s}
`, ok.addr, strict.addr))
	c := loadClient(2)
	url := "http://" + pb.listen + "/"
	for _, host := range []string{"www.test", "ghost.test", "blog.test"} {
		if _, err := do(t, c, url, host); err != nil {
			t.Fatal(err)
		}
	}
	var text string
	testproc.WaitFor(t, 5*time.Second, "warnings sent and failed", func() bool {
		text = pb.metrics(t)
		return strings.Contains(text, "pollbal_warnings_sent_total{") && strings.Contains(text, `pollbal_warning_errors_total{backend="web-2"}`)
	})
	for _, name := range specMetrics {
		if !strings.Contains(text, "\n"+name+"{") && !strings.Contains(text, "\n"+name+" ") && !strings.Contains(text, "\n"+name+"_bucket{") {
			t.Errorf("metric %s missing from /metrics", name)
		}
	}
	for _, want := range []string{
		`pollbal_pool_exhausted_total{app="ghost",pool="pool-ghost"} 1`,
		`pollbal_pool_fallback_total{app="blog",pool="pool-nobody"} 1`,
		`pollbal_requests_total{app="www",code="200"} 1`,
		`pollbal_backend_ready{backend="web-1",pool="default"} 1`,
		`pollbal_group_serving{pool="default",service="web",version="v1"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Every metric the alert rules and the Grafana dashboard in examples/ use is one of these.
	checkOpsKitMetrics(t, text)
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "pollbal_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

// TestEndToEndCorruptStateFileStopsStart: a corrupt admin state file is a clear startup error,
// never silently dropped.
func TestEndToEndCorruptStateFileStopsStart(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(`{"version":1,"overrides":{"web-1":`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "pollbal.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`site: e2e
listen: %s
admin: {listen: %s, state_file: %s}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends: [{id: web-1, address: 127.0.0.1:9}]
`, testproc.FreeAddr(t), testproc.FreeAddr(t), state)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, "pollbal", testproc.Options{}, bins.pollbal, "run", "-config", cfg)
	if code := p.ExitCode(t, 10*time.Second); code != 1 {
		t.Fatalf("exit %d with a corrupt state file, want 1", code)
	}
	if out := p.Output(); !strings.Contains(out, "admin.state_file") || !strings.Contains(out, state) {
		t.Fatalf("the startup error does not name the state file:\n%s", out)
	}
}
