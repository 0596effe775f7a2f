package metrictest

import (
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Value returns the value of series in g and whether g has that series.
func Value(t testing.TB, g prometheus.Gatherer, series string) (float64, bool) {
	t.Helper()
	return find(t, gather(t, g), series)
}

// Count returns how many series of the name in g carry every label that series names: for
// `pollbal_checks_total{backend="a"}`, every result of backend a.
func Count(t testing.TB, g prometheus.Gatherer, series string) int {
	t.Helper()
	name, labels := parseSeries(t, series)
	n := 0
	for _, m := range metrics(gather(t, g), name) {
		if carries(labelsOf(m), labels) {
			n++
		}
	}
	return n
}

// TextValue returns the value of series in text, a /metrics answer in the text exposition
// format, and whether text has that series.
func TextValue(t testing.TB, text, series string) (float64, bool) {
	t.Helper()
	return find(t, parseText(t, text), series)
}

// find returns the value of series in families and whether it is there.
func find(t testing.TB, families map[string]*dto.MetricFamily, series string) (float64, bool) {
	t.Helper()
	name, labels := parseSeries(t, series)
	for _, m := range metrics(families, name) {
		if maps.Equal(labelsOf(m), labels) {
			return valueOf(m), true
		}
	}
	return 0, false
}

// ExpectText fails t for each series of values whose value in text differs or that text
// lacks, and for each series of absent that text has.
func ExpectText(t testing.TB, text string, values map[string]float64, absent ...string) {
	t.Helper()
	families := parseText(t, text)
	for series, want := range values {
		if got, ok := find(t, families, series); !ok || got != want {
			t.Errorf("%s = %v (present: %v), want %v", series, got, ok, want)
		}
	}
	for _, series := range absent {
		if got, ok := find(t, families, series); ok {
			t.Errorf("%s = %v, want no such series", series, got)
		}
	}
}

// carries reports whether have holds every label of want with the same value.
func carries(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	byName := make(map[string]*dto.MetricFamily, len(families))
	for _, f := range families {
		byName[f.GetName()] = f
	}
	return byName
}

func parseText(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("metrics text: %v", err)
	}
	return families
}

// parseSeries splits `name{label="value",...}` into its name and labels, read by the
// exposition format's own parser.
func parseSeries(t testing.TB, series string) (string, map[string]string) {
	t.Helper()
	families := parseText(t, series+" 0\n")
	for name, f := range families {
		if len(families) == 1 && len(f.GetMetric()) == 1 {
			return name, labelsOf(f.GetMetric()[0])
		}
	}
	t.Fatalf("series %q is not one name{labels}", series)
	return "", nil
}

// metrics returns the series of family name (a histogram's by its family name, not _count).
func metrics(families map[string]*dto.MetricFamily, name string) []*dto.Metric {
	return families[name].GetMetric()
}

func labelsOf(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// valueOf returns a counter's, gauge's or untyped metric's value, and a histogram's or
// summary's sample count.
func valueOf(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount())
	default:
		return m.GetUntyped().GetValue()
	}
}
