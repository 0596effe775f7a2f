package poller

import (
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

func TestHealthNext(t *testing.T) {
	cases := []struct {
		name   string
		rise   int
		fall   int
		checks []bool // true = good
		want   []bool // ready after each check
	}{
		{name: "first good check makes ready regardless of rise", rise: 3, fall: 1,
			checks: []bool{true}, want: []bool{true}},
		{name: "failures before the first good check still skip rise", rise: 3, fall: 1,
			checks: []bool{false, false, true}, want: []bool{false, false, true}},
		{name: "fall 1 flips at once", rise: 1, fall: 1,
			checks: []bool{true, false, true}, want: []bool{true, false, true}},
		{name: "fall 2 tolerates one failure", rise: 1, fall: 2,
			checks: []bool{true, false, true, false, false}, want: []bool{true, true, true, true, false}},
		{name: "rise 2 after having been ready", rise: 2, fall: 1,
			checks: []bool{true, false, true, true}, want: []bool{true, false, false, true}},
		{name: "a failure resets the rise count", rise: 2, fall: 1,
			checks: []bool{true, false, true, false, true, true}, want: []bool{true, false, false, false, false, true}},
		{name: "a good check resets the fall count", rise: 1, fall: 3,
			checks: []bool{true, false, false, true, false, false, false}, want: []bool{true, true, true, true, true, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h health
			for i, good := range tc.checks {
				h = h.next(good, tc.rise, tc.fall)
				if h.ready != tc.want[i] {
					t.Fatalf("after check %d (good=%v): ready = %v, want %v", i+1, good, h.ready, tc.want[i])
				}
			}
		})
	}
}

func TestNextResult(t *testing.T) {
	web := []protocol.Report{{Service: "web", Status: protocol.Serving}}
	api := []protocol.Report{{Service: "api", Status: protocol.Serving}}
	initial := Result{ID: "a", Address: "x", Reason: reasonNotChecked}
	ready := Result{ID: "a", Address: "x", Ready: true, Reports: web}
	cases := []struct {
		name        string
		prev        Result
		h           health
		o           outcome
		lastGood    []protocol.Report
		wantReady   bool
		wantReason  string
		wantReports []protocol.Report
	}{
		{name: "first good check", prev: initial, h: health{ready: true},
			o: outcome{reports: web}, lastGood: web, wantReady: true, wantReports: web},
		{name: "first check fails", prev: initial, h: health{},
			o: outcome{reason: "connection refused"}, wantReason: "connection refused"},
		{name: "same good answer", prev: ready, h: health{ready: true},
			o: outcome{reports: web}, lastGood: web, wantReady: true, wantReports: web},
		{name: "equal answer in a new slice is unchanged", prev: ready, h: health{ready: true},
			o:        outcome{reports: []protocol.Report{{Service: "web", Status: protocol.Serving}}},
			lastGood: []protocol.Report{{Service: "web", Status: protocol.Serving}}, wantReady: true, wantReports: web},
		{name: "other answer", prev: ready, h: health{ready: true},
			o: outcome{reports: api}, lastGood: api, wantReady: true, wantReports: api},
		{name: "failure while still ready keeps last good answer", prev: ready, h: health{ready: true},
			o: outcome{reason: "status 503"}, lastGood: web, wantReady: true, wantReason: "status 503",
			wantReports: web},
		{name: "not ready drops reports", prev: ready, h: health{},
			o: outcome{reason: "status 503"}, lastGood: web, wantReason: "status 503"},
		{name: "empty answer differs from not ready", prev: Result{ID: "a", Address: "x"}, h: health{ready: true},
			o: outcome{reports: []protocol.Report{}}, lastGood: []protocol.Report{}, wantReady: true, wantReports: []protocol.Report{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Unix(100, 0)
			r := nextResult(tc.prev, tc.h, tc.o, tc.lastGood, at)
			if r.ID != "a" || r.Address != "x" || !r.Checked.Equal(at) {
				t.Fatalf("identity or time not carried: %+v", r)
			}
			if r.Ready != tc.wantReady || r.Reason != tc.wantReason {
				t.Fatalf("got ready=%v reason=%q, want %v %q", r.Ready, r.Reason, tc.wantReady, tc.wantReason)
			}
			if !protocol.EqualReports(r.Reports, tc.wantReports) {
				t.Fatalf("reports = %#v, want %#v", r.Reports, tc.wantReports)
			}
		})
	}
}

func TestTransition(t *testing.T) {
	cases := []struct {
		name     string
		prev, r  Result
		wantMsg  string
		wantWarn bool
	}{
		{name: "becomes ready", prev: Result{Reason: reasonNotChecked}, r: Result{Ready: true},
			wantMsg: "backend ready"},
		{name: "becomes not ready", prev: Result{Ready: true}, r: Result{Reason: "status 503"},
			wantMsg: "backend not ready", wantWarn: true},
		{name: "first check fails", prev: Result{Reason: reasonNotChecked}, r: Result{Reason: "connection refused"},
			wantMsg: "backend check failed", wantWarn: true},
		{name: "same failure again", prev: Result{Reason: "status 503"}, r: Result{Reason: "status 503"}},
		{name: "other failure", prev: Result{Reason: "status 503"}, r: Result{Reason: "status 500"},
			wantMsg: "backend check failed", wantWarn: true},
		{name: "failure while ready under fall", prev: Result{Ready: true}, r: Result{Ready: true, Reason: "status 503"},
			wantMsg: "backend check failed", wantWarn: true},
		{name: "good again while rising", prev: Result{Reason: "status 503"}, r: Result{},
			wantMsg: "backend check good"},
		{name: "steady ready", prev: Result{Ready: true}, r: Result{Ready: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, warn, ok := transition(tc.prev, tc.r)
			if ok != (tc.wantMsg != "") || msg != tc.wantMsg || warn != tc.wantWarn {
				t.Fatalf("transition = %q warn=%v ok=%v, want %q warn=%v", msg, warn, ok, tc.wantMsg, tc.wantWarn)
			}
		})
	}
}

// TestRecordDelays drives record with outcomes alone: the wait before the next check grows
// from the interval up to max_backoff while failing and returns to the interval after a good check.
func TestRecordDelays(t *testing.T) {
	s := configs.Poll{Interval: time.Second, Timeout: 800 * time.Millisecond, Rise: 1, Fall: 1,
		MaxBackoff: 5 * time.Second, MaxBody: 4096}
	cases := []struct {
		name   string
		checks []bool
		want   []time.Duration // delay after each check, in seconds
	}{
		{name: "always good", checks: []bool{true, true, true}, want: []time.Duration{1, 1, 1}},
		{name: "failing doubles up to the cap", checks: []bool{false, false, false, false, false},
			want: []time.Duration{1, 2, 4, 5, 5}},
		{name: "good check returns to the interval and resets the backoff",
			checks: []bool{false, false, false, true, false, false},
			want:   []time.Duration{1, 2, 4, 1, 1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPoller(t, Options{Settings: s, Sink: newFakeSink()})
			tg := newTarget(Target{ID: "a", Address: "127.0.0.1:1"}, s, p.metrics.forTarget("a"), p.buffers, nil)
			for i, good := range tc.checks {
				o := outcome{reports: []protocol.Report{}, result: resultOK}
				if !good {
					o = outcome{reason: "status 503", result: resultError}
				}
				p.record(tg, s, o)
				if want := tc.want[i] * time.Second; tg.delay != want {
					t.Fatalf("after check %d (good=%v): delay = %v, want %v", i+1, good, tg.delay, want)
				}
			}
		})
	}
}

func TestOffset(t *testing.T) {
	cases := []struct {
		name string
		i, n int
		want time.Duration
	}{
		{name: "single target starts at once", i: 0, n: 1, want: 0},
		{name: "first of four", i: 0, n: 4, want: 0},
		{name: "second of four", i: 1, n: 4, want: 250 * time.Millisecond},
		{name: "last of four", i: 3, n: 4, want: 750 * time.Millisecond},
		{name: "last of 2000", i: 1999, n: 2000, want: 999500 * time.Microsecond},
		{name: "no targets", i: 0, n: 0, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := offset(tc.i, tc.n, time.Second); got != tc.want {
				t.Fatalf("offset(%d, %d) = %v, want %v", tc.i, tc.n, got, tc.want)
			}
		})
	}
}
