package poller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/internal/testproc"
	"pollbal/protocol"
)

// TestLoadReport checks that X-Pool-Load is kept with its arrival time on good answers only,
// that a malformed one is ignored, counted on every answer and logged once per run of them, and
// that it never makes the backend not ready.
func TestLoadReport(t *testing.T) {
	b := newBackend(t,
		step{body: "web", load: "3/8"},
		step{body: "web", load: "5"},
		step{body: "web", load: "lots"},
		step{body: "web", load: "-1/8"},
		step{body: "web"},
		step{body: "web", load: "9/x"},
		step{status: 503, load: "1/8"},
		step{body: "web", load: "0/8"},
	)
	var logs testproc.Buffer
	sink := newFakeSink()
	reg := prometheus.NewRegistry()
	p := newPoller(t, Options{Settings: scriptedSettings(), Sink: sink, Logger: newTestLogger(&logs),
		Registerer: reg, Targets: []Target{{ID: "b", Address: b.addr}}})
	stop := start(t, p)
	results := sink.collect(t, "b", 8)
	stop()
	want := []struct {
		name  string
		ready bool
		load  *protocol.Load // At not compared
	}{
		{name: "in flight and capacity", ready: true, load: &protocol.Load{InFlight: 3, Capacity: 8}},
		{name: "in flight only", ready: true, load: &protocol.Load{InFlight: 5}},
		{name: "malformed word: ready, no report", ready: true},
		{name: "malformed negative: ready, no report", ready: true},
		{name: "no header: no report", ready: true},
		{name: "malformed capacity: ready, no report", ready: true},
		{name: "503 carries no report", ready: false},
		{name: "good again", ready: true, load: &protocol.Load{InFlight: 0, Capacity: 8}},
	}
	for i, w := range want {
		r := results[i]
		t.Run(w.name, func(t *testing.T) {
			if r.Ready != w.ready {
				t.Fatalf("Ready = %v, want %v (%+v)", r.Ready, w.ready, r)
			}
			if (r.Load == nil) != (w.load == nil) {
				t.Fatalf("Load = %+v, want %+v", r.Load, w.load)
			}
			if r.Load == nil {
				return
			}
			if r.Load.InFlight != w.load.InFlight || r.Load.Capacity != w.load.Capacity {
				t.Errorf("Load = %+v, want %+v", *r.Load, *w.load)
			}
			if !r.Load.At.Equal(r.Checked) {
				t.Errorf("Load.At = %v, want the check's arrival %v", r.Load.At, r.Checked)
			}
		})
	}
	if got := testutil.ToFloat64(p.metrics.badLoad.WithLabelValues("b")); got != 3 {
		t.Errorf("pollbal_load_report_errors_total{backend=b} = %v, want 3", got)
	}
	text := logs.String()
	if got := strings.Count(text, "malformed X-Pool-Load"); got != 2 {
		t.Errorf("%d malformed X-Pool-Load log lines, want 2 (one per run of malformed answers); log:\n%s", got, text)
	}
	if !strings.Contains(text, `value="\"lots\""`) {
		t.Errorf("the log does not quote the malformed value; log:\n%s", text)
	}
}
