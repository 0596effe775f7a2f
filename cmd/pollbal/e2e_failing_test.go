package main

// End-to-end: a backend that fails client requests while its /pool check stays good can be
// seen: it is ejected, counted per reason, named in a warn log line, and its neighbour serves
// the rest.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"pollbal/internal/metrictest"
)

// TestEndToEndTimingOutBackendIsSeen reproduces what a newcomer could not see: a backend that
// accepts requests and never answers them (its checks pass) next to a healthy one gave
// "504 200 504 200…", nothing at info or warn, no per-backend error metric, and /api/state said
// ready and not ejected (only failed connections counted towards eject_after). Now, after
// eject_after timeouts it is ejected, pollbal_backend_errors_total names it with reason
// timeout, a warn line names it, and the healthy backend serves the rest.
//
// The slow backend's checks keep passing, and its next good check readmits it; the poll
// interval is long and the slow backend second in the list (checked half an interval after the
// first), so that next check comes an interval after pollbal is ready: longer than the test
// takes.
func TestEndToEndTimingOutBackendIsSeen(t *testing.T) {
	healthy := startBackend(t, "web-ok", "127.0.0.1:0", "web serving v1\n")
	slow := startBackend(t, "web-slow", "127.0.0.1:0", "web serving v1\n", "-delay", "1h")
	pb := startPollbal(t, fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 10s, timeout: 3s, max_backoff: 20s}
proxy: {backend_timeout: 300ms, eject_after: 2}
services: {web: {}}
apps:
  - {name: www, hosts: ["www.test"]}
backends:
  - {id: web-ok, address: %s}
  - {id: web-slow, address: %s}
`, healthy.addr, slow.addr))
	st := pb.state(t)
	for _, id := range []string{"web-ok", "web-slow"} {
		if ready, reason, _, _ := st.backend(id); !ready {
			t.Fatalf("%s not ready once pollbal is: %s", id, reason)
		}
	}
	c := loadClient(1)
	url := "http://" + pb.listen + "/"
	var seen []string
	timeouts := 0
	for len(seen) < 6 && timeouts < 2 {
		a, err := do(t, c, url, "www.test")
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, fmt.Sprint(a.code))
		switch {
		case a.code == http.StatusGatewayTimeout && a.reason == "backend_timeout" && a.backend == "web-slow":
			timeouts++
		case a.code == http.StatusOK && a.backend == "web-ok":
		default:
			t.Fatalf("answers %v: the last one %+v, want 504 backend_timeout from web-slow or 200 from web-ok", seen, a)
		}
	}
	if timeouts != 2 {
		t.Fatalf("answers %v: want 2 timeouts from web-slow", seen)
	}

	// Ejected, and /api/state says so, while its checks still pass.
	var ejected, ready bool
	for _, b := range pb.state(t).Backends {
		if b.ID == "web-slow" {
			ejected, ready = b.Ejected, b.Ready
		}
	}
	if !ejected || !ready {
		t.Errorf("/api/state: web-slow ejected %v ready %v after %v, want ejected and ready", ejected, ready, seen)
	}
	for i := 0; i < 6; i++ {
		a, err := do(t, c, url, "www.test")
		if err != nil {
			t.Fatal(err)
		}
		if a.code != http.StatusOK || a.backend != "web-ok" {
			t.Fatalf("request %d after the ejection: %+v, want 200 from web-ok", i+1, a)
		}
	}
	if a, err := do(t, c, url, "nowhere.test"); err != nil || a.code != http.StatusNotFound || a.reason != "no_app" {
		t.Fatalf("a host no app matches: %+v %v, want 404 no_app", a, err)
	}

	text := pb.metrics(t)
	metrictest.ExpectText(t, text, map[string]float64{
		`pollbal_backend_errors_total{backend="web-slow",reason="timeout"}`: 2,
		`pollbal_backend_errors_total{backend="web-slow",reason="reset"}`:   0,
		`pollbal_backend_errors_total{backend="web-ok",reason="timeout"}`:   0,
		`pollbal_responses_total{reason="backend_timeout"}`:                 2,
		`pollbal_responses_total{reason="no_app"}`:                          1,
		`pollbal_responses_total{reason="pool_exhausted"}`:                  0,
		`pollbal_requests_total{app="www",code="504"}`:                      2,
	})

	// The warn lines: the failed forward (at most one a second for the backend) and the ejection.
	var failed, ejectedLine bool
	for _, line := range strings.Split(pb.Output(), "\n") {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "backend=web-slow") {
			continue
		}
		if strings.Contains(line, `msg="forward to backend failed"`) && strings.Contains(line, "app=www pool=default reason=timeout") {
			failed = true
		}
		if strings.Contains(line, "msg=\"backend ejected until its next good check\"") {
			ejectedLine = true
		}
	}
	if !failed || !ejectedLine {
		t.Errorf("warn lines naming web-slow: failed forward %v, ejection %v; want both in:\n%s", failed, ejectedLine, pb.Output())
	}
}
