package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/metric"
)

// noAppLabel is the app label of requests that matched no app.
const noAppLabel = "-"

// maxCode bounds the status codes counted under their own label; anything outside 100–599 is
// counted as "other".
const maxCode = 600

// appRequests are one app's answered-request series (pollbal_requests_total by status code and
// pollbal_request_duration_seconds), kept for the app's lifetime across configurations: a
// code's child is made the first time that code is answered. When a reload removes the app its
// series are deleted, and a request still in flight on an older snapshot cannot bring them
// back: making a child and retiring are serialised. It is safe for concurrent use and must not
// be copied.
type appRequests struct {
	name     string
	vecs     *requestVecs
	duration prometheus.Observer
	codes    [maxCode]atomic.Pointer[counter]

	mu      sync.Mutex // serialises making children with retire
	retired bool       // the app left the configuration: no child is made any more
}

// counter boxes a prometheus.Counter so that it can live behind an atomic.Pointer.
type counter struct{ prometheus.Counter }

// requestVecs are the two vectors every app's series belong to.
type requestVecs struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
}

func (v *requestVecs) newApp(name string) *appRequests {
	return &appRequests{name: name, vecs: v, duration: v.durations.WithLabelValues(name)}
}

// Done records one answered request that took elapsed.
func (r *appRequests) Done(code int, elapsed time.Duration) {
	r.Count(code)
	r.Took(elapsed)
}

// Took records the duration of a request counted earlier (Count): one whose streamed body
// ended after it was counted.
func (r *appRequests) Took(elapsed time.Duration) {
	r.duration.Observe(elapsed.Seconds())
}

// Count records one answered request without its duration.
func (r *appRequests) Count(code int) {
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
func (r *appRequests) child(code int) *counter {
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
	c := &counter{r.vecs.requests.WithLabelValues(r.name, label)}
	r.codes[code].Store(c)
	return c
}

// retire deletes the app's series for good: requests still holding it count nowhere.
func (r *appRequests) retire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retired = true
	r.vecs.requests.DeletePartialMatch(prometheus.Labels{"app": r.name})
	r.vecs.durations.DeleteLabelValues(r.name)
}

// requestMetrics holds the answered-request series of every app of the balancer's current
// configuration, and of the requests that matched no app. Like the connection pools
// (upstream.Pools) it follows the balancer alone: its table is rebuilt from the balancer's current
// snapshot when a request, or a scrape, finds it was built for another configuration, so an app
// that a reload removes has its series deleted by the next request or scrape, whichever comes
// first, and nothing has to be called after a reload. It is a prometheus.Collector: it
// collects the two vectors. It is safe for concurrent use.
type requestMetrics struct {
	bal   *balancer.Balancer
	vecs  requestVecs
	noApp *appRequests
	gone  *appRequests // of an app that left the configuration: counts nowhere
	mu    sync.Mutex   // serialises rebuilds
	t     atomic.Pointer[requestTable]
}

// requestTable is the series of one configuration's apps, by their index in it. It is
// immutable once published.
type requestTable struct {
	cfg   *configs.Config // nil before the first rebuild
	byApp []*appRequests  // by balancer.App.Index
}

func newRequestMetrics(bal *balancer.Balancer, reg prometheus.Registerer) (*requestMetrics, error) {
	r := &requestMetrics{bal: bal, vecs: requestVecs{
		requests: metric.Counters("pollbal_requests_total",
			"Client requests answered, by app (\"-\" when no app matched) and status code.",
			"app", "code"),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pollbal_request_duration_seconds",
			Help:    "Time from the request being read to its answer being written (a streamed body's last byte), by app.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"app"}),
	}}
	r.noApp = r.vecs.newApp(noAppLabel)
	// A request that matches no app is answered 404 no_app: that series is known from the
	// start, so a dashboard of pollbal_requests_total shows 0, not "no data", until traffic.
	r.noApp.child(http.StatusNotFound)
	r.gone = &appRequests{vecs: &r.vecs, duration: discard{}, retired: true}
	r.t.Store(&requestTable{})
	r.rebuild()
	if err := metric.Register(reg, r); err != nil {
		return nil, fmt.Errorf("register request metrics: %w", err)
	}
	return r, nil
}

// of returns the series of app, a route of snap (those of requests that matched no app when app
// is nil). The common case is one pointer compare and one slice read.
func (r *requestMetrics) of(snap *balancer.Snapshot, app *balancer.App) *appRequests {
	if app == nil {
		return r.noApp
	}
	if t := r.t.Load(); t.cfg == snap.Config() {
		return t.byApp[app.Index]
	}
	return r.slow(app)
}

// slow serves a request whose snapshot is not the table's: one older than the balancer's (its
// app has the series of the same name in the current configuration, or none any more), or newer
// than the table (the table is rebuilt first).
func (r *requestMetrics) slow(app *balancer.App) *appRequests {
	t := r.t.Load()
	if t.cfg != r.bal.Snapshot().Config() {
		t = r.rebuild()
	}
	for _, a := range t.byApp {
		if a.name == app.Name {
			return a
		}
	}
	// The app left the configuration while this request held an older snapshot: it counts
	// nowhere, as its retired series would.
	return r.gone
}

// discard is an Observer that keeps nothing.
type discard struct{}

func (discard) Observe(float64) {}

// rebuild publishes the table of the balancer's current configuration: apps that stay keep
// their series, new ones get new ones, and the series of apps that left are deleted.
func (r *requestMetrics) rebuild() *requestTable {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := r.bal.Snapshot().Config() // read under mu: tables only move forward
	old := r.t.Load()
	if old.cfg == cfg {
		return old
	}
	kept := make(map[string]*appRequests, len(old.byApp))
	for _, a := range old.byApp {
		kept[a.name] = a
	}
	next := &requestTable{cfg: cfg, byApp: make([]*appRequests, len(cfg.Apps))}
	for i, ca := range cfg.Apps {
		a := kept[ca.Name]
		if a == nil {
			a = r.vecs.newApp(ca.Name)
		}
		delete(kept, ca.Name)
		next.byApp[i] = a
	}
	for _, a := range kept {
		a.retire()
	}
	r.t.Store(next)
	return next
}

// Describe implements prometheus.Collector.
func (r *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	r.vecs.requests.Describe(ch)
	r.vecs.durations.Describe(ch)
}

// Collect implements prometheus.Collector: the series of the balancer's current configuration,
// the table rebuilt first when a reload came since.
func (r *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	if r.t.Load().cfg != r.bal.Snapshot().Config() {
		r.rebuild()
	}
	r.vecs.requests.Collect(ch)
	r.vecs.durations.Collect(ch)
}
