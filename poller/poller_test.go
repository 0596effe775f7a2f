package poller

import (
	"context"
	"net"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
	"pollbal/protocol"
)

func TestNewRejects(t *testing.T) {
	good := Options{Site: "s", Version: "v", Settings: fastSettings(), Sink: newFakeSink(),
		Targets: []Target{{ID: "a", Address: "127.0.0.1:1"}}}
	cases := []struct {
		name    string
		mutate  func(o *Options)
		wantErr string // "" = accepted
	}{
		{name: "valid", mutate: func(*Options) {}},
		{name: "no site", mutate: func(o *Options) { o.Site = "" }, wantErr: "site is empty"},
		{name: "no version", mutate: func(o *Options) { o.Version = "" }, wantErr: "version is empty"},
		{name: "no sink", mutate: func(o *Options) { o.Sink = nil }, wantErr: "sink is nil"},
		{name: "timeout not below interval", mutate: func(o *Options) { o.Settings.Timeout = o.Settings.Interval },
			wantErr: "poll.timeout"},
		{name: "zero interval", mutate: func(o *Options) { o.Settings.Interval = 0 }, wantErr: "poll.interval"},
		{name: "zero rise", mutate: func(o *Options) { o.Settings.Rise = 0 }, wantErr: "poll.rise"},
		{name: "zero fall", mutate: func(o *Options) { o.Settings.Fall = 0 }, wantErr: "poll.fall"},
		{name: "backoff below interval", mutate: func(o *Options) { o.Settings.MaxBackoff = time.Millisecond },
			wantErr: "poll.max_backoff"},
		{name: "zero max body", mutate: func(o *Options) { o.Settings.MaxBody = 0 }, wantErr: "poll.max_body"},
		{name: "duplicate id", mutate: func(o *Options) { o.Targets = append(o.Targets, o.Targets[0]) },
			wantErr: `targets[1]: duplicate id "a"`},
		{name: "empty id", mutate: func(o *Options) { o.Targets[0].ID = "" }, wantErr: "targets[0]: empty id"},
		{name: "empty address", mutate: func(o *Options) { o.Targets[0].Address = "" }, wantErr: "targets[0]: empty address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			o.Targets = append([]Target(nil), good.Targets...)
			tc.mutate(&o)
			_, err := New(o)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunTwice(t *testing.T) {
	p := newPoller(t, Options{Settings: fastSettings(), Sink: newFakeSink()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if err := p.Run(ctx); err == nil {
		t.Fatal("second Run: no error")
	}
}

func TestCheckRequest(t *testing.T) {
	b := newBackend(t, step{body: "web serving v1\n"})
	sink := newFakeSink()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// A timed-out check would fail the result and keep-alive checks below.
	p, err := New(Options{Site: "eu-west-1", Version: "1.2.3", Settings: scriptedSettings(), Sink: sink,
		Targets: []Target{{ID: "web-1", Address: b.addr}}, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	start(t, p)
	h := b.nextHit(t)
	cases := []struct {
		name, got, want string
	}{
		{name: "method", got: h.method, want: "GET"},
		{name: "path", got: h.path, want: "/pool"},
		{name: "host", got: h.host, want: b.addr},
		{name: "cache control", got: h.header.Get("Cache-Control"), want: "no-cache"},
		{name: "user agent", got: h.header.Get("User-Agent"), want: "pollbal/1.2.3"},
		{name: "site", got: h.header.Get("X-Pollbal-Site"), want: "eu-west-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("%s = %q, want %q", tc.name, tc.got, tc.want)
			}
		})
	}
	r := sink.waitResult(t, "ready", func(r Result) bool { return r.Ready })
	want := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}
	if r.ID != "web-1" || r.Address != b.addr || r.Reason != "" || !reflect.DeepEqual(r.Reports, want) ||
		!r.Checked.Equal(clock) {
		t.Fatalf("first result = %+v", r)
	}
	// An unchanged answer is not parsed again: later Results share the Reports.
	if r2 := sink.collect(t, "web-1", 1)[0]; !reflect.DeepEqual(r2.Reports, want) || &r2.Reports[0] != &r.Reports[0] {
		t.Fatalf("second result = %+v, want the same Reports, sharing the first one's", r2)
	}
	// Keep-alive: later checks reuse the first connection.
	for range 3 {
		b.nextHit(t)
	}
	if n := b.conns.Load(); n != 1 {
		t.Fatalf("connections = %d after 4 checks, want 1 (keep-alive)", n)
	}
}

// TestCheckFailures checks each failure kind's reason and metric result.
func TestCheckFailures(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	_ = closed.Close()
	over := strings.Repeat("web serving v1\n", 10) // 150 bytes
	cases := []struct {
		name       string
		steps      []step // nil: nothing listens
		maxBody    int
		wantReason string
		wantResult string
	}{
		{name: "status 503", steps: []step{{status: 503, body: "web"}}, wantReason: "status 503", wantResult: resultError},
		{name: "connection refused", wantReason: "connection refused", wantResult: resultError},
		{name: "timeout", steps: []step{{hold: true, body: "web"}}, wantReason: "timeout after 290ms", wantResult: resultTimeout},
		{name: "body over the limit with content length", steps: []step{{body: over}}, maxBody: 100,
			wantReason: "body over 100 bytes", wantResult: resultInvalid},
		{name: "chunked body over the limit", steps: []step{{body: over, chunked: true}}, maxBody: 100,
			wantReason: "body over 100 bytes", wantResult: resultInvalid},
		{name: "unknown status", steps: []step{{body: "web\napi down\n"}},
			wantReason: `line 2: unknown status "down"`, wantResult: resultInvalid},
		{name: "version without status", steps: []step{{body: "web v3"}},
			wantReason: `line 1: unknown status "v3"`, wantResult: resultInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := refused
			if tc.steps != nil {
				addr = newBackend(t, tc.steps...).addr
			}
			// A scripted answer read late must not become "timeout after 95ms" (seen under load
			// for "chunked body over the limit").
			s := scriptedSettings()
			if tc.maxBody > 0 {
				s.MaxBody = tc.maxBody
			}
			sink := newFakeSink()
			reg := prometheus.NewRegistry()
			p := newPoller(t, Options{Settings: s, Sink: sink, Registerer: reg,
				Targets: []Target{{ID: "b", Address: addr}}})
			stop := start(t, p)
			r := sink.waitResult(t, "first", func(Result) bool { return true })
			stop()
			if r.Ready || r.Reason != tc.wantReason || r.Reports != nil {
				t.Fatalf("result = %+v, want not ready with reason %q", r, tc.wantReason)
			}
			if got, _ := metrictest.Value(t, reg, `pollbal_checks_total{backend="b",result="`+tc.wantResult+`"}`); got < 1 {
				t.Fatalf("pollbal_checks_total{backend=b,result=%s} = %v, want >= 1", tc.wantResult, got)
			}
		})
	}
}

func TestRiseFall(t *testing.T) {
	good, bad := step{body: "web serving v1"}, step{status: 503}
	cases := []struct {
		name       string
		rise, fall int
		steps      []step
		wantReady  []bool
		wantReason []string
	}{
		{name: "rise 2 fall 2",
			rise: 2, fall: 2, steps: []step{good, bad, bad, good, good, good},
			wantReady:  []bool{true, true, false, false, true, true},
			wantReason: []string{"", "status 503", "status 503", "", "", ""}},
		{name: "first good check ignores rise", rise: 3, fall: 1, steps: []step{bad, good, bad, good, good, good},
			wantReady:  []bool{false, true, false, false, false, true},
			wantReason: []string{"status 503", "", "status 503", "", "", ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.steps...)
			s := scriptedSettings()
			s.Rise, s.Fall = tc.rise, tc.fall
			sink := newFakeSink()
			p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{{ID: "b", Address: b.addr}}})
			start(t, p)
			for i, r := range sink.collect(t, "b", len(tc.steps)) {
				if r.Ready != tc.wantReady[i] || r.Reason != tc.wantReason[i] || (r.Reports != nil) != r.Ready {
					t.Fatalf("check %d: ready=%v reason=%q reports=%v, want ready=%v reason=%q",
						i+1, r.Ready, r.Reason, r.Reports, tc.wantReady[i], tc.wantReason[i])
				}
			}
		})
	}
}

// TestBackoffSchedule: a failing target's delays are the interval, then doubling, up to the cap.
func TestBackoffSchedule(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name          string
		interval, max time.Duration
		want          []time.Duration
	}{
		{name: "doubles to the cap and stays", interval: 50 * ms, max: 400 * ms, want: []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 400 * ms}},
		{name: "a cap between two steps is kept", interval: 100 * ms, max: 300 * ms, want: []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms}},
		{name: "cap equal to the interval", interval: time.Second, max: time.Second, want: []time.Duration{time.Second, time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(tc.interval, tc.max)
			for i, want := range tc.want {
				if got := b.NextBackOff(); got != want {
					t.Fatalf("delay %d = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// sameResult reports whether a and b agree on what a Sink acts on: readiness, reason, reports.
func sameResult(a, b Result) bool {
	return a.Ready == b.Ready && a.Reason == b.Reason && protocol.EqualReports(a.Reports, b.Reports)
}

// TestReasonLoggedOnChange counts log lines: a reason is logged when it changes, not per check.
func TestReasonLoggedOnChange(t *testing.T) {
	good, invalid, unavailable := step{body: "web"}, step{body: "bad!"}, step{status: 503}
	b := newBackend(t, good, invalid, invalid, invalid, unavailable, unavailable, good, good)
	var logs testproc.Buffer
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: scriptedSettings(), Sink: sink, Logger: newTestLogger(&logs),
		Targets: []Target{{ID: "b", Address: b.addr}}})
	stop := start(t, p)
	results := sink.collect(t, "b", 8)
	stop()
	changed := 0
	prev := Result{Reason: reasonNotChecked}
	for _, r := range results {
		if !sameResult(r, prev) {
			changed++
		}
		prev = r
	}
	if changed != 4 {
		t.Errorf("%d results differ from the one before, want 4: %+v", changed, results)
	}
	text := logs.String()
	cases := []struct {
		name string
		line string // a substring that identifies the line
		want int
	}{
		{name: "ready twice", line: `msg="backend ready"`, want: 2},
		{name: "not ready once with the parse error", line: `msg="backend not ready" backend=b address=` + b.addr + ` reason="line 1: invalid service \"bad!\""`, want: 1},
		{name: "reason change logged once", line: `msg="backend check failed" backend=b address=` + b.addr + ` reason="status 503"`, want: 1},
		{name: "nothing else", line: "msg=", want: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Count(text, tc.line); got != tc.want {
				t.Fatalf("%d lines with %s, want %d; log:\n%s", got, tc.line, tc.want, text)
			}
		})
	}
}

func TestRoundDoneWithoutTargets(t *testing.T) {
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: fastSettings(), Sink: sink})
	start(t, p)
	select {
	case <-sink.rounds:
	case <-time.After(waitLimit):
		t.Fatal("no RoundDone with no targets")
	}
}

// TestUpdate keeps a target's state across a reload, stops a removed one and starts a new one.
func TestUpdate(t *testing.T) {
	// A timed-out check would change a result and the connection compared below.
	s := scriptedSettings()
	s.Fall = 1000 // a failing target stays ready, which a fresh state would not be
	kept := newBackend(t, step{body: "web serving v1"}, step{status: 503})
	removed := newBackend(t, step{body: "web"})
	added := newBackend(t, step{body: "api"})
	sink := newFakeSink()
	reg := prometheus.NewRegistry()
	p := newPoller(t, Options{Settings: s, Sink: sink, Registerer: reg, Targets: []Target{
		{ID: "kept", Address: kept.addr}, {ID: "removed", Address: removed.addr}}})
	start(t, p)
	before := sink.waitResult(t, "kept failing but ready", func(r Result) bool {
		return r.ID == "kept" && r.Ready && r.Reason == "status 503"
	})
	sink.waitResult(t, "removed checked", func(r Result) bool { return r.ID == "removed" && r.Ready })

	p.Update(s, []Target{{ID: "kept", Address: kept.addr}, {ID: "added", Address: added.addr}})
	removedHits := removed.count.Load()

	var afterKept, afterAdded []Result
	removedResults := 0
	deadline := time.After(waitLimit)
	for len(afterKept) < 3 || len(afterAdded) < 3 {
		select {
		case r := <-sink.results:
			switch r.ID {
			case "kept":
				afterKept = append(afterKept, r)
			case "added":
				afterAdded = append(afterAdded, r)
			case "removed":
				removedResults++
			}
		case <-deadline:
			t.Fatalf("after Update: %d results for kept, %d for added", len(afterKept), len(afterAdded))
		}
	}
	k := afterKept[len(afterKept)-1]
	cases := []struct {
		name string
		ok   bool
	}{
		{name: "kept target is still ready (fall counter kept)", ok: k.Ready && k.Reason == "status 503"},
		{name: "kept target keeps its last good answer",
			ok: reflect.DeepEqual(k.Reports, []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}})},
		{name: "kept target's results are unchanged (last result kept)", ok: sameResult(afterKept[0], before) && sameResult(k, before)},
		{name: "kept target keeps its connection", ok: kept.conns.Load() == 1},
		{name: "added target is checked and ready", ok: afterAdded[0].Ready},
		{name: "removed target is not checked again (one in-flight check at most)",
			ok: removed.count.Load() <= removedHits+1},
		{name: "removed target publishes nothing after Update returns", ok: removedResults == 0},
		{name: "removed target's metrics are deleted", ok: metrictest.Count(t, reg, `pollbal_checks_total{backend="removed"}`) == 0},
		{name: "added target's metrics exist", ok: metrictest.Count(t, reg, `pollbal_checks_total{backend="added"}`) > 0},
		{name: "kept target's metrics exist", ok: metrictest.Count(t, reg, `pollbal_checks_total{backend="kept"}`) > 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Fatalf("failed; last kept result %+v, added %+v", k, afterAdded[0])
			}
		})
	}
}

// TestUpdateSettings applies new settings to a running target without a restart.
func TestUpdateSettings(t *testing.T) {
	// A check that reaches the timeout fails with "timeout after ...", not the body limit
	// (fastSettings' 95 ms can be reached on a loaded machine).
	s := scriptedSettings()
	b := newBackend(t, step{body: "web serving v1"})
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{{ID: "b", Address: b.addr}}})
	start(t, p)
	sink.waitResult(t, "ready", func(r Result) bool { return r.Ready })
	s.MaxBody = 8
	p.Update(s, []Target{{ID: "b", Address: b.addr}})
	r := sink.waitResult(t, "failing on the new body limit", func(r Result) bool { return !r.Ready })
	if r.Reason != "body over 8 bytes" {
		t.Fatalf("reason = %q, want %q", r.Reason, "body over 8 bytes")
	}
	bad := s
	bad.Timeout = 0
	p.Update(bad, nil) // rejected whole: the target keeps being checked
	b.script(step{body: "web"})
	sink.waitResult(t, "ready again", func(r Result) bool { return r.ID == "b" && r.Ready })
}

// TestUpdateAddress restarts a target whose address changed: same ID, fresh state.
func TestUpdateAddress(t *testing.T) {
	s := scriptedSettings() // the first result at the new address must be the backend's answer
	s.Rise = 5
	before, after := newBackend(t, step{body: "web"}), newBackend(t, step{status: 503})
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{{ID: "b", Address: before.addr}}})
	start(t, p)
	sink.waitResult(t, "ready", func(r Result) bool { return r.Ready })
	p.Update(s, []Target{{ID: "b", Address: after.addr}})
	r := sink.waitResult(t, "from the new address", func(r Result) bool { return r.Address == after.addr })
	if r.Ready || r.Reason != "status 503" {
		t.Fatalf("first result at the new address = %+v, want not ready (fresh state)", r)
	}
	after.script(step{body: "api"})
	r = sink.waitResult(t, "ready at the new address", func(r Result) bool { return r.Ready })
	if r.Address != after.addr {
		t.Fatalf("ready result from %s, want %s", r.Address, after.addr)
	}
}

// TestUpdateBeforeRun applies an Update made before Run.
func TestUpdateBeforeRun(t *testing.T) {
	b := newBackend(t, step{body: "web"})
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: scriptedSettings(), Sink: sink,
		Targets: []Target{{ID: "old", Address: "127.0.0.1:1"}}})
	p.Update(scriptedSettings(), []Target{{ID: "new", Address: b.addr}})
	start(t, p)
	if r := sink.waitResult(t, "first", func(Result) bool { return true }); r.ID != "new" || !r.Ready {
		t.Fatalf("first result = %+v, want new and ready", r)
	}
	select {
	case <-sink.rounds:
	case <-time.After(waitLimit):
		t.Fatal("no RoundDone: the target removed before Run still counts")
	}
}

// TestUpdateConcurrent reloads a running poller over and over while checks run, for the race
// detector; afterwards every target of the last reload is checked.
func TestUpdateConcurrent(t *testing.T) {
	s := fastSettings()
	s.Interval, s.Timeout, s.MaxBackoff = 10*time.Millisecond, 9*time.Millisecond, 20*time.Millisecond
	var all []Target
	for i := range 5 {
		all = append(all, Target{ID: string(rune('a' + i)), Address: newBackend(t, step{body: "web"}).addr})
	}
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: s, Sink: sink, Targets: all})
	start(t, p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			u := s
			u.Rise, u.MaxBody = 1+i%3, 4096+i%2
			p.Update(u, all[i%5:])
		}
	}()
	for i := range 200 {
		p.Update(s, all[:1+i%5])
		if i%20 == 0 {
			sink.waitResult(t, "any", func(Result) bool { return true })
		}
	}
	<-done
	p.Update(s, all)
	for drained := false; !drained; {
		select {
		case <-sink.results:
		default:
			drained = true
		}
	}
	seen := map[string]bool{}
	for len(seen) < len(all) {
		seen[sink.waitResult(t, "after the last reload", func(Result) bool { return true }).ID] = true
	}
}

// confirmSink is a fakeSink that asks for a confirmation after every answer
// whose report says 1 in flight, and counts what it is asked.
type confirmSink struct {
	*fakeSink
	after time.Duration
	asked atomic.Int64
}

func (s *confirmSink) ConfirmAfter(r Result) time.Duration {
	s.asked.Add(1)
	if r.Load != nil && r.Load.InFlight == 1 {
		return s.after
	}
	return 0
}
