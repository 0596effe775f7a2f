package metrictest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "checks_total", Help: "h"}, []string{"backend", "result"})
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "up", Help: "h"})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "wait_seconds", Help: "h"})
	reg.MustRegister(checks, up, wait)
	checks.WithLabelValues("a", "ok").Add(3)
	checks.WithLabelValues("a", "timeout").Add(1)
	checks.WithLabelValues("b", "ok").Add(0)
	up.Set(1)
	wait.Observe(0.5)
	wait.Observe(1.5)

	tests := []struct {
		name   string
		series string
		want   float64
		wantOK bool
	}{
		{name: "counter", series: `checks_total{backend="a",result="ok"}`, want: 3, wantOK: true},
		{name: "labels in any order", series: `checks_total{result="timeout",backend="a"}`, want: 1, wantOK: true},
		{name: "present at zero", series: `checks_total{backend="b",result="ok"}`, want: 0, wantOK: true},
		{name: "fewer labels is another series", series: `checks_total{backend="a"}`, wantOK: false},
		{name: "absent label value", series: `checks_total{backend="c",result="ok"}`, wantOK: false},
		{name: "gauge without labels", series: `up`, want: 1, wantOK: true},
		{name: "histogram sample count", series: `wait_seconds`, want: 2, wantOK: true},
		{name: "absent name", series: `down`, wantOK: false},
	}
	text := exposition(t, reg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := Value(t, reg, tt.series); got != tt.want || ok != tt.wantOK {
				t.Errorf("Value = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			if got, ok := TextValue(t, text, tt.series); got != tt.want || ok != tt.wantOK {
				t.Errorf("TextValue = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "checks_total", Help: "h"}, []string{"backend", "result"})
	reg.MustRegister(checks)
	checks.WithLabelValues("a", "ok").Inc()
	checks.WithLabelValues("a", "timeout").Inc()
	checks.WithLabelValues("b", "ok").Inc()
	for series, want := range map[string]int{
		`checks_total{backend="a"}`:             2,
		`checks_total{result="ok"}`:             2,
		`checks_total`:                          3,
		`checks_total{backend="a",result="ok"}`: 1,
		`checks_total{backend="gone"}`:          0,
		`other_total`:                           0,
	} {
		if got := Count(t, reg, series); got != want {
			t.Errorf("Count(%s) = %d, want %d", series, got, want)
		}
	}
}

// exposition renders reg as a /metrics endpoint would.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// errorsOf is a testing.TB that keeps what Errorf reports.
type errorsOf struct {
	testing.TB
	got []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

func TestExpectText(t *testing.T) {
	text := "# TYPE up gauge\nup 1\n# TYPE hits_total counter\nhits_total{code=\"200\"} 3\n"
	tests := []struct {
		name   string
		values map[string]float64
		absent []string
		errs   int
	}{
		{name: "all as expected", values: map[string]float64{"up": 1, `hits_total{code="200"}`: 3}, absent: []string{`hits_total{code="500"}`}},
		{name: "a value differs", values: map[string]float64{"up": 0}, errs: 1},
		{name: "a series is missing", values: map[string]float64{`hits_total{code="500"}`: 0}, errs: 1},
		{name: "a series is there", absent: []string{"up", `hits_total{code="200"}`}, errs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &errorsOf{TB: t}
			ExpectText(e, text, tt.values, tt.absent...)
			if len(e.got) != tt.errs {
				t.Errorf("%d errors %q, want %d", len(e.got), e.got, tt.errs)
			}
		})
	}
}
