package proxy

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// noAppLabel is the app label of requests that matched no app.
const noAppLabel = "-"

// maxCode bounds the status codes counted under their own label; anything outside 100–599 is
// counted as "other".
const maxCode = 600

// metrics holds the proxy's request metrics. Children are resolved once per app (and per status
// code, lazily), so the request path never looks up label values. It is safe for concurrent use.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu    sync.Mutex // serialises writers of apps
	apps  atomic.Pointer[map[string]*appMetrics]
	noApp *appMetrics
}

// appMetrics are one app's pre-resolved children. It is safe for concurrent use.
type appMetrics struct {
	name     string
	requests *prometheus.CounterVec
	duration prometheus.Observer
	codes    [maxCode]atomic.Pointer[counter]
	// retired is set when a reload removed the app: a request still in flight then must not
	// create a new series for it.
	retired atomic.Bool
}

// counter boxes a prometheus.Counter so that it can live behind an atomic.Pointer.
type counter struct{ prometheus.Counter }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pollbal_requests_total",
			Help: "Client requests answered, by app (\"-\" when no app matched) and status code.",
		}, []string{"app", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pollbal_request_duration_seconds",
			Help:    "Time from the request being read to its answer being ready, by app.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"app"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register proxy metrics: %w", err)
		}
	}
	m.apps.Store(&map[string]*appMetrics{})
	m.noApp = m.newApp(noAppLabel)
	return m, nil
}

func (m *metrics) newApp(name string) *appMetrics {
	return &appMetrics{name: name, requests: m.requests, duration: m.duration.WithLabelValues(name)}
}

// app returns the children of the named app, creating them on first use.
func (m *metrics) app(name string) *appMetrics {
	if a := (*m.apps.Load())[name]; a != nil {
		return a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.apps.Load()
	if a := old[name]; a != nil {
		return a
	}
	a := m.newApp(name)
	next := make(map[string]*appMetrics, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = a
	m.apps.Store(&next)
	return a
}

// keep forgets the children of every app not in names (removed by a reload), so their series
// leave /metrics.
func (m *metrics) keep(names map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.apps.Load()
	next := make(map[string]*appMetrics, len(names))
	for k, v := range old {
		if names[k] {
			next[k] = v
			continue
		}
		v.retired.Store(true)
		m.requests.DeletePartialMatch(prometheus.Labels{"app": k})
		m.duration.DeleteLabelValues(k)
	}
	m.apps.Store(&next)
}

// done records one answered request that took elapsed.
func (a *appMetrics) done(code int, elapsed time.Duration) {
	a.count(code)
	a.duration.Observe(elapsed.Seconds())
}

func (a *appMetrics) count(code int) {
	if code < 100 || code >= maxCode {
		code = 0
	}
	c := a.codes[code].Load()
	if c == nil {
		if a.retired.Load() {
			return
		}
		label := "other"
		if code != 0 {
			label = strconv.Itoa(code)
		}
		a.codes[code].CompareAndSwap(nil, &counter{a.requests.WithLabelValues(a.name, label)})
		c = a.codes[code].Load()
	}
	c.Inc()
}
