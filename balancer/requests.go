package balancer

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/metric"
)

// noAppLabel is the app label of requests that matched no app.
const noAppLabel = "-"

// maxCode bounds the status codes counted under their own label; anything outside 100–599 is
// counted as "other".
const maxCode = 600

// RequestMetrics are one app's answered-request series (pollbal_requests_total by status code
// and pollbal_request_duration_seconds), resolved once for the app's lifetime across
// configurations and kept on its App in every snapshot, so the request path looks nothing up:
// a code's child is made the first time that code is answered. When a reload removes the app
// its series are deleted, and a request still in flight on an older snapshot cannot bring
// them back: making a child and retiring are serialised. It is safe for concurrent use and must
// not be copied.
type RequestMetrics struct {
	name      string
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	duration  prometheus.Observer
	codes     [maxCode]atomic.Pointer[counter]

	mu      sync.Mutex // serialises making children with retire
	retired bool       // the app left the configuration: no child is made any more
}

// counter boxes a prometheus.Counter so that it can live behind an atomic.Pointer.
type counter struct{ prometheus.Counter }

func newRequestVecs() (*prometheus.CounterVec, *prometheus.HistogramVec) {
	return metric.Counters("pollbal_requests_total",
			"Client requests answered, by app (\"-\" when no app matched) and status code.",
			"app", "code"),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pollbal_request_duration_seconds",
			Help:    "Time from the request being read to its answer being written (a streamed body's last byte), by app.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"app"})
}

func (m *metrics) newRequestMetrics(name string) *RequestMetrics {
	return &RequestMetrics{name: name, requests: m.requests, durations: m.durations, duration: m.durations.WithLabelValues(name)}
}

// Done records one answered request that took elapsed.
func (r *RequestMetrics) Done(code int, elapsed time.Duration) {
	r.Count(code)
	r.Took(elapsed)
}

// Took records the duration of a request counted earlier (Count): one whose streamed body
// ended after it was counted.
func (r *RequestMetrics) Took(elapsed time.Duration) {
	r.duration.Observe(elapsed.Seconds())
}

// Count records one answered request without its duration.
func (r *RequestMetrics) Count(code int) {
	if code < 100 || code >= maxCode {
		code = 0
	}
	c := r.codes[code].Load()
	if c == nil {
		if c = r.child(code); c == nil {
			return
		}
	}
	c.Inc()
}

// child makes the series of code, unless the app has been retired (nil then).
func (r *RequestMetrics) child(code int) *counter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retired {
		return nil
	}
	if c := r.codes[code].Load(); c != nil {
		return c
	}
	label := "other"
	if code != 0 {
		label = strconv.Itoa(code)
	}
	c := &counter{r.requests.WithLabelValues(r.name, label)}
	r.codes[code].Store(c)
	return c
}

// retire deletes the app's series for good: requests still holding it count nowhere.
func (r *RequestMetrics) retire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retired = true
	r.requests.DeletePartialMatch(prometheus.Labels{"app": r.name})
	r.durations.DeleteLabelValues(r.name)
}

// Requests returns the request metrics of app, or those of requests that matched no app when
// app is nil.
func (s *Snapshot) Requests(app *App) *RequestMetrics {
	if app == nil {
		return s.bal.metrics.noApp
	}
	return app.requests
}

// syncAppMetricsLocked resolves the per-app metric handles of cfg's apps: an app that stays
// keeps its request metrics, and its pool counters while its pool stays; a new app gets new
// ones; the series of an app that left are deleted. The caller holds the balancer's mutex.
func (b *Balancer) syncAppMetricsLocked(cfg *configs.Config) {
	counters := make(map[string]*appCounters, len(cfg.Apps))
	requests := make(map[string]*RequestMetrics, len(cfg.Apps))
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
		r := b.requests[a.Name]
		if r == nil {
			r = b.metrics.newRequestMetrics(a.Name)
		}
		requests[a.Name] = r
	}
	for name, c := range b.counters {
		if counters[name] == nil {
			b.metrics.forget(c)
		}
	}
	for name, r := range b.requests {
		if requests[name] == nil {
			r.retire()
		}
	}
	b.counters, b.requests = counters, requests
}
