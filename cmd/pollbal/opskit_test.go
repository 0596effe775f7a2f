package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	alertRulesPath = "../../examples/prometheus/pollbal-alerts.yaml"
	dashboardPath  = "../../examples/grafana/pollbal-dashboard.json"
)

// syntheticMetrics are series that Prometheus itself adds to every scrape target.
var syntheticMetrics = []string{"up"}

var metricNameRe = regexp.MustCompile(`\b(pollbal_[a-z0-9_]+|up)\b`)

// opsKitQueries returns every PromQL expression of the alerting rules and the Grafana
// dashboard (panel targets and template variable queries), keyed by where it is.
func opsKitQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}

	data, err := os.ReadFile(alertRulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("%s: %v", alertRulesPath, err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}

	data, err = os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			out["variable "+v.Name] = v.Definition
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d queries in the alert rules and the dashboard", len(out))
	}
	return out
}

// exposedNames returns the sample names of a /metrics exposition.
func exposedNames(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// checkOpsKitMetrics fails unless every query of the alert rules and the dashboard names at
// least one metric and every metric it names is in the /metrics text (after traffic that
// exercised every metric) or is one Prometheus adds itself.
func checkOpsKitMetrics(t *testing.T, metricsText string) {
	t.Helper()
	exposed := exposedNames(metricsText)
	for where, expr := range opsKitQueries(t) {
		names := metricNameRe.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !exposed[n] && !slices.Contains(syntheticMetrics, n) {
				t.Errorf("%s uses %s, which pollbal's /metrics does not expose", where, n)
			}
		}
	}
}

// TestOpsKitMetricCheckCatchesAMissingMetric shows the check above fails on a metric name that
// /metrics does not have (a renamed metric, a typo in a rule).
func TestOpsKitMetricCheckCatchesAMissingMetric(t *testing.T) {
	exposed := exposedNames("# TYPE pollbal_requests_total counter\npollbal_requests_total{app=\"www\",code=\"200\"} 1\nup 1\n")
	for _, tc := range []struct {
		name string
		want bool
	}{
		{name: "pollbal_requests_total", want: true},
		{name: "pollbal_request_total", want: false},
		{name: "pollbal_requests_total_bucket", want: false},
	} {
		if exposed[tc.name] != tc.want {
			t.Errorf("exposed[%q] = %v, want %v", tc.name, exposed[tc.name], tc.want)
		}
	}
}
