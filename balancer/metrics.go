package balancer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/metric"
)

// appCounters are one app's pre-resolved counter children, so the request path never looks up
// label values.
type appCounters struct {
	app, pool string
	exhausted prometheus.Counter
	fallback  prometheus.Counter
}

// metrics holds the balancer's metrics. Gauges that mirror state (readiness, in-flight, limits)
// are read from the current snapshot at scrape time, so their labels always follow pool moves
// and reloads.
type metrics struct {
	bal       *Balancer
	exhausted *prometheus.CounterVec
	fallback  *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	full      *prometheus.CounterVec
	errors    *prometheus.CounterVec // pollbal_backend_errors_total

	ready, inFlight, limit *prometheus.Desc
}

func newMetrics(reg prometheus.Registerer, bal *Balancer) (*metrics, error) {
	m := &metrics{
		bal: bal,
		exhausted: metric.Counters("pollbal_pool_exhausted_total",
			"Requests answered 503 because the app's pool (and default, where allowed) had no available candidate; pool is the app's resolved pool.",
			"pool", "app"),
		fallback: metric.Counters("pollbal_pool_fallback_total",
			"Requests served from the default pool because the app's resolved pool had no available candidate.",
			"pool", "app"),
		ignored: metric.Counters("pollbal_reports_ignored_total",
			"/pool answer lines dropped because they name a service the configuration does not declare.",
			"backend"),
		full: metric.Counters("pollbal_backend_full_total",
			"Requests the backend refused as full (503 with X-Pool-Full) before doing any work; each went on to the next candidate.",
			"backend"),
		errors: metric.Counters("pollbal_backend_errors_total",
			"Failed forwards to the backend by reason: connect (no connection, other than refused), refused (connection refused), timeout (no answer within proxy.backend_timeout), reset (connection broken without an answer), bad_response (an unusable answer).",
			"backend", "reason"),
		ready:    prometheus.NewDesc("pollbal_backend_ready", "1 when the backend's last checks make it ready, else 0.", []string{"backend", "pool"}, nil),
		inFlight: prometheus.NewDesc("pollbal_backend_in_flight", "Requests this instance has in flight on the backend (leases held).", []string{"backend"}, nil),
		limit:    prometheus.NewDesc("pollbal_backend_limit", "Requests this instance may have in flight on the backend now: its share of the capacity for the fleet (fleet.instances, load reports), slow start applied.", []string{"backend"}, nil),
	}
	if err := metric.Register(reg, m.exhausted, m.fallback, m.ignored, m.full, m.errors, m); err != nil {
		return nil, fmt.Errorf("register balancer metrics: %w", err)
	}
	return m, nil
}

// resolveBackend resolves the per-backend counter children of rt (every error reason's
// included, so each series exists from the start) and makes its ignored-reports series.
func (m *metrics) resolveBackend(rt *Backend) {
	m.ignored.WithLabelValues(rt.ID)
	rt.full = m.full.WithLabelValues(rt.ID)
	for r := range rt.errors {
		rt.errors[r] = m.errors.WithLabelValues(rt.ID, ErrorReason(r).String())
	}
}

// forgetBackend deletes the per-backend series of a backend id the configuration no longer has.
func (m *metrics) forgetBackend(id string) {
	m.ignored.DeleteLabelValues(id)
	m.full.DeleteLabelValues(id)
	m.errors.DeletePartialMatch(prometheus.Labels{"backend": id})
}

func (m *metrics) appCounters(app, pool string) *appCounters {
	return &appCounters{
		app: app, pool: pool,
		exhausted: m.exhausted.WithLabelValues(pool, app),
		fallback:  m.fallback.WithLabelValues(pool, app),
	}
}

func (m *metrics) forget(c *appCounters) {
	m.exhausted.DeleteLabelValues(c.pool, c.app)
	m.fallback.DeleteLabelValues(c.pool, c.app)
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.ready
	ch <- m.inFlight
	ch <- m.limit
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.bal.Snapshot()
	now := m.bal.now()
	for _, mb := range s.members {
		h := mb.b.Health()
		v := 0.0
		if h.Ready {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, float64(s.limit(mb, h, now)), mb.cfg.ID)
		ch <- prometheus.MustNewConstMetric(m.ready, prometheus.GaugeValue, v, mb.cfg.ID, mb.pool)
		ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(mb.b.InFlight()), mb.cfg.ID)
	}
}

// syncAppMetricsLocked resolves the pool counters of cfg's apps: an app that stays in the same
// pool keeps its children, any other gets new ones, and the series of an app that left or moved
// are deleted. The caller holds the balancer's mutex.
func (b *Balancer) syncAppMetricsLocked(cfg *configs.Config) {
	counters := make(map[string]*appCounters, len(cfg.Apps))
	for _, a := range cfg.Apps {
		pool, _, _ := configs.AppPool(a)
		c := b.counters[a.Name]
		if c == nil || c.pool != pool {
			if c != nil {
				b.metrics.forget(c)
			}
			c = b.metrics.appCounters(a.Name, pool)
		}
		counters[a.Name] = c
	}
	for name, c := range b.counters {
		if counters[name] == nil {
			b.metrics.forget(c)
		}
	}
	b.counters = counters
}
