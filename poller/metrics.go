package poller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metric"
)

// Values of the result label of pollbal_checks_total.
const (
	resultOK      = "ok"      // 200 with a valid answer
	resultError   = "error"   // connection error or a status other than 200
	resultTimeout = "timeout" // no answer within poll.timeout
	resultInvalid = "invalid" // 200 with an answer over max_body or that does not parse
)

// metrics are the poller's collectors. Safe for concurrent use.
type metrics struct {
	checks   *prometheus.CounterVec
	duration prometheus.Histogram
	badLoad  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		checks: metric.Counters("pollbal_checks_total",
			"GET /pool checks by backend and result (ok, error, timeout, invalid).",
			"backend", "result"),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pollbal_check_duration_seconds",
			Help:    "Duration of GET /pool checks.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		badLoad: metric.Counters("pollbal_load_report_errors_total",
			"Good /pool answers whose X-Pool-Load header was malformed (ignored), by backend.",
			"backend"),
	}
	if err := metric.Register(reg, m.checks, m.duration, m.badLoad); err != nil {
		return nil, fmt.Errorf("register poller metrics: %w", err)
	}
	return m, nil
}

// targetMetrics are one target's pre-resolved children, so a check never looks labels up.
type targetMetrics struct {
	ok, err, timeout, invalid prometheus.Counter
	badLoad                   prometheus.Counter
}

func (m *metrics) forTarget(id string) targetMetrics {
	return targetMetrics{
		ok:      m.checks.WithLabelValues(id, resultOK),
		err:     m.checks.WithLabelValues(id, resultError),
		timeout: m.checks.WithLabelValues(id, resultTimeout),
		invalid: m.checks.WithLabelValues(id, resultInvalid),
		badLoad: m.badLoad.WithLabelValues(id),
	}
}

func (tm targetMetrics) count(result string) {
	switch result {
	case resultOK:
		tm.ok.Inc()
	case resultTimeout:
		tm.timeout.Inc()
	case resultInvalid:
		tm.invalid.Inc()
	default:
		tm.err.Inc()
	}
}

// forget deletes a removed target's label sets. A check still in flight for it increments
// children that are no longer exported, so it cannot bring them back.
func (m *metrics) forget(id string) {
	m.checks.DeletePartialMatch(prometheus.Labels{"backend": id})
	m.badLoad.DeleteLabelValues(id)
}
