package metric

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCounters(t *testing.T) {
	c := Counters("metric_requests_total", "Requests, by app and code.", "app", "code")
	c.WithLabelValues("www", "200").Add(3)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	want := `# HELP metric_requests_total Requests, by app and code.
# TYPE metric_requests_total counter
metric_requests_total{app="www",code="200"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "metric_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestRegister(t *testing.T) {
	a := Counters("metric_a_total", "A.", "x")
	b := prometheus.NewCounter(prometheus.CounterOpts{Name: "metric_b_total", Help: "B."})
	if err := Register(nil, a, b); err != nil {
		t.Errorf("Register(nil, ...) = %v, want nil", err)
	}
	reg := prometheus.NewRegistry()
	if err := Register(reg, a, b); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 1 { // a has no child yet
		t.Errorf("gathered %d series (%v), want 1", n, err)
	}
	// Both again, and a new one between them: the new one registers, both failures are told.
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "metric_c_total", Help: "C."})
	err := Register(reg, a, c, b)
	var are prometheus.AlreadyRegisteredError
	if err == nil || !errors.As(err, &are) {
		t.Fatalf("Register of registered collectors = %v, want AlreadyRegisteredError", err)
	}
	if n := strings.Count(err.Error(), "duplicate metrics collector registration attempted"); n != 2 {
		t.Errorf("error %q tells %d failures, want 2", err, n)
	}
	if n, err := testutil.GatherAndCount(reg, "metric_c_total"); err != nil || n != 1 {
		t.Errorf("metric_c_total: %d series (%v), want 1: a failure stopped the rest", n, err)
	}
}
