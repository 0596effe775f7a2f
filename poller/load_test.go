package poller

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/internal/testproc"
	"pollbal/report"
)

func TestParseLoad(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		inFlight int64
		capacity int64
		ok       bool
	}{
		{name: "in flight and capacity", value: "12/64", inFlight: 12, capacity: 64, ok: true},
		{name: "in flight only", value: "12", inFlight: 12, ok: true},
		{name: "zero in flight", value: "0/8", inFlight: 0, capacity: 8, ok: true},
		{name: "over capacity is a valid report", value: "9/8", inFlight: 9, capacity: 8, ok: true},
		{name: "nine digits", value: "999999999/999999999", inFlight: 999999999, capacity: 999999999, ok: true},
		{name: "leading zeros are digits", value: "007/010", inFlight: 7, capacity: 10, ok: true},
		{name: "empty", value: ""},
		{name: "ten digits", value: "1234567890"},
		{name: "ten digit capacity", value: "1/1234567890"},
		{name: "capacity zero", value: "0/0"},
		{name: "slash without capacity", value: "3/"},
		{name: "slash without in flight", value: "/8"},
		{name: "negative", value: "-1/8"},
		{name: "plus sign", value: "+1/8"},
		{name: "inner space", value: "1 /8"},
		{name: "trailing space", value: "1/8 "},
		{name: "two slashes", value: "1/8/9"},
		{name: "fraction", value: "1.5/8"},
		{name: "hex", value: "0x10"},
		{name: "words", value: "busy"},
		{name: "percent", value: "50%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, c, err := ParseLoad([]byte(tt.value))
			if (err == nil) != tt.ok {
				t.Fatalf("ParseLoad(%q) err = %v, want ok=%v", tt.value, err, tt.ok)
			}
			if tt.ok && (n != tt.inFlight || c != tt.capacity) {
				t.Errorf("ParseLoad(%q) = %d, %d; want %d, %d", tt.value, n, c, tt.inFlight, tt.capacity)
			}
		})
	}
}

func FuzzParseLoad(f *testing.F) {
	for _, s := range []string{"12/64", "12", "0/0", "", "1/", "999999999/1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		n, c, err := ParseLoad(v)
		if err != nil {
			return
		}
		if n < 0 || c < 0 || n > 999999999 || c > 999999999 {
			t.Fatalf("ParseLoad(%q) = %d, %d: out of range", v, n, c)
		}
	})
}

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
		load  *report.Load // At not compared
	}{
		{name: "in flight and capacity", ready: true, load: &report.Load{InFlight: 3, Capacity: 8}},
		{name: "in flight only", ready: true, load: &report.Load{InFlight: 5}},
		{name: "malformed word: ready, no report", ready: true},
		{name: "malformed negative: ready, no report", ready: true},
		{name: "no header: no report", ready: true},
		{name: "malformed capacity: ready, no report", ready: true},
		{name: "503 carries no report", ready: false},
		{name: "good again", ready: true, load: &report.Load{InFlight: 0, Capacity: 8}},
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
