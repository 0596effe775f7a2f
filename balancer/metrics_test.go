package balancer

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

// Issue 28: dashboard panels showed "no data" until a first event. Each backend's ignored
// reports series exists from the start, at 0; a backend that leaves takes its series with it.
func TestIgnoredSeriesKnownFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	apps := []configs.App{{Name: "www", Hosts: []string{"*"}}}
	b, err := New(Options{Config: configtest.New(apps, []configs.Backend{{ID: "b1"}, {ID: "b2"}}), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pollbal_reports_ignored_total /pool answer lines dropped because they name a service the configuration does not declare.
# TYPE pollbal_reports_ignored_total counter
pollbal_reports_ignored_total{backend="b1"} 0
pollbal_reports_ignored_total{backend="b2"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "pollbal_reports_ignored_total"); err != nil {
		t.Fatal(err)
	}
	b.Update(configtest.New(apps, []configs.Backend{{ID: "b1"}}))
	if n := testutil.CollectAndCount(reg, "pollbal_reports_ignored_total"); n != 1 {
		t.Errorf("%d pollbal_reports_ignored_total series after b2 left, want 1", n)
	}
}
