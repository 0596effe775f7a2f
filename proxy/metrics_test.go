package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Regression: a request that took an app's metrics before a reload removed the app, and then
// finished with a status code not seen before, re-created the removed app's series for good.
func TestRemovedAppSeriesStayRemoved(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	gone := m.app("gone")
	gone.done(200, time.Millisecond)
	m.keep(map[string]bool{})
	gone.done(503, time.Millisecond) // the request in flight during the reload
	if n := testutil.CollectAndCount(m.requests); n != 0 {
		t.Fatalf("%d pollbal_requests_total series after the app was removed, want 0", n)
	}
	kept := m.app("kept")
	kept.done(503, time.Millisecond)
	if n := testutil.CollectAndCount(m.requests); n != 1 {
		t.Fatalf("%d series for a live app, want 1", n)
	}
}
