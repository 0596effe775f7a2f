package grafana

// Issue 28: panels showed "No data" on a freshly started pollbal until a first event (a
// request, an ignored /pool line, a warning), because their series did not exist yet. This
// runs the real binary on a typical configuration, with no traffic, and checks that every
// metric the dashboard queries is on /metrics once the first check round has run.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

var metricNameRe = regexp.MustCompile(`\bpollbal_[a-z0-9_]+\b`)

// dashboardMetrics returns every metric name the dashboard's queries (panel targets and
// template variables) use, sorted.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("pollbal-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating json.RawMessage `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names = append(names, metricNameRe.FindAllString(tg.Expr, -1)...)
		}
	}
	names = append(names, metricNameRe.FindAllString(string(d.Templating), -1)...)
	slices.Sort(names)
	return slices.Compact(names)
}

// missing returns the names that no sample of the exposition text has.
func missing(names []string, exposition string) []string {
	exposed := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if i := strings.IndexAny(line, "{ "); i > 0 && !strings.HasPrefix(line, "#") {
			exposed[line[:i]] = true
		}
	}
	var out []string
	for _, n := range names {
		if !exposed[n] {
			out = append(out, n)
		}
	}
	return out
}

func TestMissingSeesAnAbsentMetric(t *testing.T) {
	text := "# HELP pollbal_requests_total x\n# TYPE pollbal_requests_total counter\npollbal_requests_total{app=\"-\",code=\"404\"} 0\npollbal_up 1\n"
	if got := missing([]string{"pollbal_requests_total", "pollbal_up", "pollbal_reports_ignored_total"}, text); !slices.Equal(got, []string{"pollbal_reports_ignored_total"}) {
		t.Fatalf("missing = %q, want only pollbal_reports_ignored_total", got)
	}
}

func TestDashboardMetricsExistFromStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pollbal; skipped with -short")
	}
	names := dashboardMetrics(t)
	if len(names) < 15 {
		t.Fatalf("found %d metric names in the dashboard: %q", len(names), names)
	}
	dir := t.TempDir()
	pollbal, backend := filepath.Join(dir, "pollbal"), filepath.Join(dir, "backend")
	for out, pkg := range map[string]string{pollbal: "../../cmd/pollbal", backend: "../../internal/testbackend"} {
		if err := testproc.GoBuild(out, pkg, testproc.Race); err != nil {
			t.Fatal(err)
		}
	}
	pool := filepath.Join(dir, "pool")
	if err := os.WriteFile(pool, []byte("web serving v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, id := range []string{"web-1", "web-2"} {
		_, addr := testproc.StartServer(t, id, testproc.Options{}, backend, "-listen", "127.0.0.1:0", "-id", id, "-pool-file", pool)
		addrs = append(addrs, addr)
	}
	admin := testproc.FreeAddr(t)
	cfg := filepath.Join(dir, "pollbal.yaml")
	// Typical: two apps (one a tenant's, falling back to default), one service with a warning
	// threshold, two backends.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`site: fresh
listen: %s
admin: {listen: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {warning_threshold: 1}}
apps:
  - {name: shop, hosts: ["shop.example.com"], owner: acme}
  - {name: www, hosts: ["*"]}
backends:
  - {id: web-1, address: %s}
  - {id: web-2, address: %s}
`, testproc.FreeAddr(t), admin, addrs[0], addrs[1])), 0o644); err != nil {
		t.Fatal(err)
	}
	pb := testproc.Start(t, "pollbal", testproc.Options{}, pollbal, "run", "-config", cfg)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + admin + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	pb.WaitFor(t, 15*time.Second, "/readyz", func() bool { code, _ := get("/readyz"); return code == 200 })
	// The warning groups are known once a warning round has seen the backends' reports, a
	// round or two after ready: poll, bounded, until nothing is missing.
	var absent []string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; <-tick.C {
		_, text := get("/metrics")
		if absent = missing(names, text); len(absent) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(absent) > 0 {
		t.Errorf("5 s after ready, a freshly started pollbal does not expose %q, which the dashboard queries (its panels would show No data)", absent)
	}
}
