package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// requestsTotal is pollbal_requests_total{app, code} as the registry exposes it (0 when absent).
func requestsTotal(t testing.TB, reg prometheus.Gatherer, app, code string) float64 {
	t.Helper()
	for _, m := range family(t, reg, "pollbal_requests_total") {
		if labelOf(m, "app") == app && labelOf(m, "code") == code {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// requestsCounted is the sum of every pollbal_requests_total series: the requests counted as
// answered. A series can exist at 0 (requests matching no app have theirs from the start).
func requestsCounted(t testing.TB, reg prometheus.Gatherer) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range family(t, reg, "pollbal_requests_total") {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// seriesOf counts the series of the metric name the registry exposes for app ("" for every app).
func seriesOf(t testing.TB, reg prometheus.Gatherer, name, app string) int {
	t.Helper()
	n := 0
	for _, m := range family(t, reg, name) {
		if app == "" || labelOf(m, "app") == app {
			n++
		}
	}
	return n
}

// family returns the series of the metric name the registry exposes.
func family(t testing.TB, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// seriesValue is the value of the counter name{labels} (name, value pairs) the registry
// exposes, and whether that series exists.
func seriesValue(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	for _, m := range family(t, reg, name) {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && labelOf(m, labels[i]) == labels[i+1]
		}
		if match {
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func labelOf(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// Requests in flight on an app that a reload removes finish on the old snapshot, each with a
// status code the app never answered before, and still the app's series stay removed: its
// request metrics were retired with it (requests.go). Run under -race.
func TestInFlightRequestsDoNotBringBackRemovedApp(t *testing.T) {
	release := make(chan struct{})
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/slow" {
			<-release
			ctx.SetStatusCode(218)
		}
		ctx.SetBodyString("ok")
	})
	cfg := testConfig([]configs.App{
		{Name: "gone", Hosts: []string{"gone.test"}},
		{Name: "kept", Hosts: []string{"kept.test"}},
	}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 100}})
	e := newEnv(t, cfg, "b1")
	if r := e.do("GET", "gone.test", "/", ""); r.code != 200 {
		t.Fatalf("got %v", r)
	}
	if n := seriesOf(t, e.reg, "pollbal_requests_total", "gone"); n != 1 {
		t.Fatalf("%d requests_total series for gone before the reload, want 1", n)
	}

	const inFlight = 8
	codes := make(chan int, inFlight)
	for i := 0; i < inFlight; i++ {
		go func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://gone.test/slow")
			if err := e.newClient().Do(req, resp); err != nil {
				t.Errorf("request in flight during the reload: %v", err)
				codes <- 0
				return
			}
			codes <- resp.StatusCode()
		}()
	}
	testproc.WaitFor(t, 10*time.Second, "every request at the backend", func() bool { return be.hits.Load() == 1+inFlight })
	next := *cfg
	next.Apps = []configs.App{{Name: "kept", Hosts: []string{"kept.test"}, Service: "web"}}
	e.bal.Update(&next)
	if n := seriesOf(t, e.reg, "pollbal_requests_total", "gone"); n != 0 {
		t.Errorf("%d requests_total series for gone right after the reload, want 0", n)
	}
	close(release)
	for i := 0; i < inFlight; i++ {
		if code := <-codes; code != 218 && code != 0 {
			t.Errorf("request in flight during the reload: got %d, want the backend's 218", code)
		}
	}
	e.waitIdle()
	for _, name := range []string{"pollbal_requests_total", "pollbal_request_duration_seconds"} {
		if n := seriesOf(t, e.reg, name, "gone"); n != 0 {
			t.Errorf("%d %s series for the removed app after its requests finished, want 0", n, name)
		}
	}
	if r := e.do("GET", "gone.test", "/", ""); r.code != 404 {
		t.Fatalf("after the reload: got %v, want 404 no_app", r)
	}
	if got := requestsTotal(t, e.reg, "-", "404"); got != 1 {
		t.Errorf(`requests_total{app="-",code="404"} = %v, want 1`, got)
	}
}
