package balancer

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

func TestEjects(t *testing.T) {
	tests := []struct {
		r    ErrorReason
		want bool
	}{
		{r: ErrorConnect, want: true},
		{r: ErrorRefused, want: true},
		{r: ErrorTimeout, want: true},
		{r: ErrorReset, want: true},
		{r: ErrorBadResponse, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.r.String(), func(t *testing.T) {
			if got := ejects(tt.r); got != tt.want {
				t.Errorf("ejects(%s) = %v, want %v", tt.r, got, tt.want)
			}
		})
	}
}

func TestEjectsAnswer(t *testing.T) {
	tests := []struct {
		name       string
		code       int
		ejectOn5xx bool
		want       bool
	}{
		{name: "502 without eject_on_5xx", code: 502},
		{name: "503 without eject_on_5xx", code: 503},
		{name: "504 without eject_on_5xx", code: 504},
		{name: "502 with eject_on_5xx", code: 502, ejectOn5xx: true, want: true},
		{name: "503 with eject_on_5xx", code: 503, ejectOn5xx: true, want: true},
		{name: "504 with eject_on_5xx", code: 504, ejectOn5xx: true, want: true},
		{name: "500 is the application's error, not a gateway's", code: 500, ejectOn5xx: true},
		{name: "501", code: 501, ejectOn5xx: true},
		{name: "505", code: 505, ejectOn5xx: true},
		{name: "200", code: 200, ejectOn5xx: true},
		{name: "404", code: 404, ejectOn5xx: true},
		{name: "429", code: 429, ejectOn5xx: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ejectsAnswer(tt.code, tt.ejectOn5xx); got != tt.want {
				t.Errorf("ejectsAnswer(%d, %v) = %v, want %v", tt.code, tt.ejectOn5xx, got, tt.want)
			}
		})
	}
}

func TestLogDue(t *testing.T) {
	const base = int64(1_700_000_000) * int64(time.Second)
	tests := []struct {
		name      string
		last, now int64
		want      bool
	}{
		{name: "never logged", last: 0, now: base, want: true},
		{name: "just logged", last: base, now: base},
		{name: "within the second", last: base, now: base + int64(999*time.Millisecond)},
		{name: "a second later", last: base, now: base + int64(time.Second), want: true},
		{name: "long after", last: base, now: base + int64(time.Hour), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logDue(tt.last, tt.now); got != tt.want {
				t.Errorf("logDue(%d, %d) = %v, want %v", tt.last, tt.now, got, tt.want)
			}
		})
	}
}

// failEnv is a balancer with one app over backends b1 and b2, a clock the test moves, and its
// log and metrics at hand.
type failEnv struct {
	bal  *Balancer
	reg  *prometheus.Registry
	logs *testproc.Buffer
	now  atomic.Int64 // Unix nanoseconds
}

func newFailEnv(t *testing.T, tune func(*configs.Proxy)) *failEnv {
	t.Helper()
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}, {ID: "b2"}})
	tune(&cfg.Proxy)
	e := &failEnv{reg: prometheus.NewRegistry(), logs: &testproc.Buffer{}}
	e.now.Store(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	bal, err := New(Options{Config: cfg, Registerer: e.reg,
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
		Now:    func() time.Time { return time.Unix(0, e.now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	markReady(bal, []string{"b1", "b2"})
	e.bal = bal
	return e
}

// lease takes a slot on backend id (b1 or b2, whichever the test wants) by excluding the other.
func (e *failEnv) lease(t *testing.T, id string) Lease {
	t.Helper()
	s := e.bal.Snapshot()
	var tried Tried
	for _, b := range s.Backends() {
		if b.ID != id {
			tried.Add(b)
		}
	}
	l, err := e.bal.Acquire(s, s.AppByName("www"), &tried)
	if err != nil || l.Backend.ID != id {
		t.Fatalf("lease on %s: %v %v", id, l.Backend, err)
	}
	return l
}

// fail reports a forward to id that failed for r (a timeout as TimedOut), then releases its
// lease.
func (e *failEnv) fail(t *testing.T, id string, r ErrorReason) {
	t.Helper()
	l := e.lease(t, id)
	res := Result{Outcome: Failed, App: l.snap.AppByName("www"), Lease: l, Reason: r, Err: errors.New("what the round trip said")}
	if r == ErrorTimeout {
		res = Result{Outcome: TimedOut, App: res.App, Lease: l, Err: res.Err}
	}
	e.bal.Report(res)
	l.Release()
}

func (e *failEnv) answer(t *testing.T, id string, code int) {
	t.Helper()
	l := e.lease(t, id)
	e.bal.Report(Result{Outcome: Answered, App: l.snap.AppByName("www"), Lease: l, Code: code})
	l.Release()
}

func (e *failEnv) ejected(t *testing.T, id string) bool {
	t.Helper()
	for _, b := range e.bal.Snapshot().Backends() {
		if b.ID == id {
			return b.Ejected()
		}
	}
	t.Fatalf("no backend %s", id)
	return false
}

func (e *failEnv) errorsTotal(t *testing.T, id string, r ErrorReason) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pollbal_backend_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["backend"] == id && labels["reason"] == r.String() {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1 // no such series
}

// warnLines are the log lines about failed forwards.
func (e *failEnv) warnLines() []string {
	var out []string
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="forward to backend failed"`) {
			out = append(out, line)
		}
	}
	return out
}

// Every backend has a series for every reason from the start, at 0, so that a first failure
// shows as an increase; a reload that removes a backend removes its series.
func TestBackendErrorSeries(t *testing.T) {
	e := newFailEnv(t, func(*configs.Proxy) {})
	for _, id := range []string{"b1", "b2"} {
		for r := range numErrorReasons {
			if got := e.errorsTotal(t, id, r); got != 0 {
				t.Errorf("%s %s = %v before any failure, want a series at 0", id, r, got)
			}
		}
	}
	if n := testutil.CollectAndCount(e.reg, "pollbal_backend_errors_total"); n != 2*int(numErrorReasons) {
		t.Errorf("%d series, want %d", n, 2*numErrorReasons)
	}
	e.bal.Update(configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, []configs.Backend{{ID: "b1"}}))
	if got := e.errorsTotal(t, "b2", ErrorTimeout); got != -1 {
		t.Errorf("removed backend's series still there: %v", got)
	}
	if n := testutil.CollectAndCount(e.reg, "pollbal_backend_errors_total"); n != int(numErrorReasons) {
		t.Errorf("%d series after b2 left, want %d", n, numErrorReasons)
	}
}

// A failed forward is counted under its reason and backend, and logged at warn naming the
// backend, app, pool, reason and error, at most once a second per backend; the line after a
// quiet second says how many were left out.
func TestFailedIsCountedAndLoggedOnceASecond(t *testing.T) {
	e := newFailEnv(t, func(p *configs.Proxy) { p.EjectAfter = 0 })
	e.fail(t, "b1", ErrorTimeout)
	e.fail(t, "b1", ErrorTimeout)
	e.fail(t, "b1", ErrorRefused)
	e.fail(t, "b2", ErrorReset) // another backend has its own second
	if got := e.errorsTotal(t, "b1", ErrorTimeout); got != 2 {
		t.Errorf("b1 timeouts = %v, want 2", got)
	}
	if got := e.errorsTotal(t, "b1", ErrorRefused); got != 1 {
		t.Errorf("b1 refused = %v, want 1", got)
	}
	if got := e.errorsTotal(t, "b2", ErrorReset); got != 1 {
		t.Errorf("b2 reset = %v, want 1", got)
	}
	if got := e.errorsTotal(t, "b2", ErrorTimeout); got != 0 {
		t.Errorf("b2 timeouts = %v, want 0", got)
	}
	lines := e.warnLines()
	if len(lines) != 2 {
		t.Fatalf("%d warn lines within the first second, want 2 (one per backend):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, want := range []string{
		`backend=b1 app=www pool=default reason=timeout error="what the round trip said" not_logged_since_last=0`,
		`backend=b2 app=www pool=default reason=reset error="what the round trip said" not_logged_since_last=0`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to hold %s", i, lines[i], want)
		}
	}
	e.now.Add(int64(999 * time.Millisecond))
	e.fail(t, "b1", ErrorBadResponse)
	if n := len(e.warnLines()); n != 2 {
		t.Errorf("%d warn lines 999ms after the first, want still 2", n)
	}
	e.now.Add(int64(time.Millisecond))
	e.fail(t, "b1", ErrorConnect)
	lines = e.warnLines()
	if len(lines) != 3 || !strings.Contains(lines[2], "backend=b1 app=www pool=default reason=connect") ||
		!strings.Contains(lines[2], "not_logged_since_last=3") {
		t.Errorf("a second later: %q, want a third line for b1 counting the 3 left out", lines)
	}
}

// eject_after counts connection failures and timeouts, not unusable answers; an answer ends the
// streak.
func TestFailedEjectsOnConnectionFailuresAndTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		reasons []ErrorReason
		answer  int // an answer after the first failure (0: none)
		want    bool
	}{
		{name: "two timeouts", reasons: []ErrorReason{ErrorTimeout, ErrorTimeout}, want: true},
		{name: "refused then reset", reasons: []ErrorReason{ErrorRefused, ErrorReset}, want: true},
		{name: "connect then timeout", reasons: []ErrorReason{ErrorConnect, ErrorTimeout}, want: true},
		{name: "bad responses do not count", reasons: []ErrorReason{ErrorBadResponse, ErrorBadResponse, ErrorTimeout}},
		{name: "an answer in between ends the streak", reasons: []ErrorReason{ErrorTimeout, ErrorTimeout}, answer: 200},
		{name: "a 502 ends it too without eject_on_5xx", reasons: []ErrorReason{ErrorTimeout, ErrorTimeout}, answer: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFailEnv(t, func(p *configs.Proxy) { p.EjectAfter = 2 })
			for i, r := range tt.reasons {
				e.fail(t, "b1", r)
				if i == 0 && tt.answer != 0 {
					e.answer(t, "b1", tt.answer)
				}
			}
			if got := e.ejected(t, "b1"); got != tt.want {
				t.Errorf("ejected = %v, want %v", got, tt.want)
			}
			if e.ejected(t, "b2") {
				t.Error("b2 ejected by b1's failures")
			}
		})
	}
}

// With proxy.eject_on_5xx, 502, 503 and 504 answers count towards eject_after (mixed with
// timeouts too); without it they never do.
func TestAnsweredEjectOn5xx(t *testing.T) {
	tests := []struct {
		name       string
		ejectOn5xx bool
		codes      []int
		want       bool
	}{
		{name: "off: 502s never eject", codes: []int{502, 502, 502}},
		{name: "on: two 502s", ejectOn5xx: true, codes: []int{502, 502}, want: true},
		{name: "on: 503 and 504", ejectOn5xx: true, codes: []int{503, 504}, want: true},
		{name: "on: 500s do not count", ejectOn5xx: true, codes: []int{500, 500, 500}},
		{name: "on: a 200 ends the streak", ejectOn5xx: true, codes: []int{502, 200, 502}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFailEnv(t, func(p *configs.Proxy) { p.EjectAfter, p.EjectOn5xx = 2, tt.ejectOn5xx })
			for _, code := range tt.codes {
				e.answer(t, "b1", code)
			}
			if got := e.ejected(t, "b1"); got != tt.want {
				t.Errorf("ejected = %v, want %v", got, tt.want)
			}
			if got := e.errorsTotal(t, "b1", ErrorBadResponse); got != 0 {
				t.Errorf("an answer counted as a backend error: %v", got)
			}
		})
	}
	t.Run("on: a timeout and a 504", func(t *testing.T) {
		e := newFailEnv(t, func(p *configs.Proxy) { p.EjectAfter, p.EjectOn5xx = 2, true })
		e.fail(t, "b1", ErrorTimeout)
		e.answer(t, "b1", 504)
		if !e.ejected(t, "b1") {
			t.Error("not ejected after a timeout and a 504")
		}
	})
}
