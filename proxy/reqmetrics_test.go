package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// wantNoRequestCounted fails t if pollbal_requests_total in reg counted any request: only the
// series made at start, {app="-",code="404"}, may exist, and at 0.
func wantNoRequestCounted(t testing.TB, reg prometheus.Gatherer, what string) {
	t.Helper()
	v, _ := metrictest.Value(t, reg, `pollbal_requests_total{app="-",code="404"}`)
	if n := metrictest.Count(t, reg, "pollbal_requests_total"); n != 1 || v != 0 {
		t.Errorf("%s was counted in pollbal_requests_total: %d series, the no-app 404 at %v", what, n, v)
	}
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
	cfg := configtest.New([]configs.App{
		{Name: "gone", Hosts: []string{"gone.test"}},
		{Name: "kept", Hosts: []string{"kept.test"}},
	}, []configs.Backend{{ID: "b1", Address: be.addr, Capacity: 100}}, tieBreakID)

	e := newEnv(t, cfg, "b1")
	if r := e.do("GET", "gone.test", "/", ""); r.code != 200 {
		t.Fatalf("got %v", r)
	}
	if n := metrictest.Count(t, e.reg, `pollbal_requests_total{app="gone"}`); n != 1 {
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
	if n := metrictest.Count(t, e.reg, `pollbal_requests_total{app="gone"}`); n != 0 {
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
		if n := metrictest.Count(t, e.reg, name+`{app="gone"}`); n != 0 {
			t.Errorf("%d %s series for the removed app after its requests finished, want 0", n, name)
		}
	}
	if r := e.do("GET", "gone.test", "/", ""); r.code != 404 {
		t.Fatalf("after the reload: got %v, want 404 no_app", r)
	}
	if got, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="-",code="404"}`); got != 1 {
		t.Errorf(`requests_total{app="-",code="404"} = %v, want 1`, got)
	}
}
