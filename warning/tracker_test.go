package warning

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/protocol"
)

// fakeBackend is one ready backend as fakeMembers lists it.
type fakeBackend struct {
	id, address, pool string
	reports           []protocol.Report
}

// fakeMembers is a Members view the test sets directly.
type fakeMembers struct {
	mu    sync.Mutex
	ready []fakeBackend
}

func (f *fakeMembers) EachReady(fn func(id, address, pool string, reports []protocol.Report)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.ready {
		fn(b.id, b.address, b.pool, b.reports)
	}
}

func (f *fakeMembers) set(ready ...fakeBackend) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = ready
}

// fakeEvents records events as "kind: message".
type fakeEvents struct {
	mu   sync.Mutex
	list []string
}

func (e *fakeEvents) Add(kind, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, kind+": "+message)
}

func (e *fakeEvents) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.list
	e.list = nil
	return out
}

func web(id, address string, status protocol.Status) fakeBackend {
	return fakeBackend{id: id, address: address, pool: "p", reports: []protocol.Report{{Service: "web", Status: status, Version: "v1"}}}
}

// trackerConfig is a site whose service web has threshold 2, with the given backend ids.
func trackerConfig(ids ...string) *configs.Config {
	var backends []configs.Backend
	for _, id := range ids {
		backends = append(backends, configs.Backend{ID: id, Address: "127.0.0.1:1", Capacity: 1})
	}
	return configtest.New(nil, backends, configtest.WarningThreshold(2),
		func(c *configs.Config) { c.Warning.Timeout = 2 * time.Second })
}

type trackerFixture struct {
	tr      *Tracker
	members *fakeMembers
	events  *fakeEvents
	reg     *prometheus.Registry
}

func newTrackerFixture(t *testing.T, cfg *configs.Config) *trackerFixture {
	t.Helper()
	f := &trackerFixture{members: &fakeMembers{}, events: &fakeEvents{}, reg: prometheus.NewRegistry()}
	tr, err := NewTracker(TrackerOptions{Members: f.members, Events: f.events, Config: cfg,
		SenderOptions: SenderOptions{Site: "test-site", Timeout: 2 * time.Second, Registerer: f.reg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	f.tr = tr
	return f
}

// round runs one warning round and waits for the POSTs it started.
func (f *trackerFixture) round() {
	f.tr.Round()
	f.tr.sender.wait()
}

// remembers says what the tracker still holds of backend id: its error series, its delivery
// state, or "" for nothing.
func (f *trackerFixture) remembers(t *testing.T, id string) string {
	t.Helper()
	if _, ok := metrictest.Value(t, f.reg, `pollbal_warning_errors_total{backend="`+id+`"}`); ok {
		return "pollbal_warning_errors_total series"
	}
	f.tr.sender.mu.Lock()
	defer f.tr.sender.mu.Unlock()
	if _, ok := f.tr.sender.state[id]; ok {
		return "delivery state"
	}
	return ""
}

func TestTrackerRound(t *testing.T) {
	srvA, gotA := recordingServer(t, http.StatusNoContent)
	srvB, gotB := recordingServer(t, http.StatusNoContent)
	srvC, gotC := recordingServer(t, http.StatusNoContent)
	f := newTrackerFixture(t, trackerConfig("a", "b", "c", "d"))
	group := `{pool="p",service="web",version="v1"}`

	// Two serving at threshold 2 and one leaving: both serving are warned, the leaving one not.
	f.members.set(web("a", addr(srvA), protocol.Serving), web("b", addr(srvB), protocol.Serving), web("c", addr(srvC), protocol.Leaving))
	f.round()
	want := []GroupState{{Pool: "p", Service: "web", Version: "v1", Serving: 2, Leaving: 1, Threshold: 2, Warned: []string{"a", "b"}}}
	if got := f.tr.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Groups() = %+v, want %+v", got, want)
	}
	for id, warned := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if f.tr.Warned(id) != warned {
			t.Errorf("Warned(%s) = %t, want %t", id, !warned, warned)
		}
	}
	for name, ch := range map[string]chan received{"a": gotA, "b": gotB} {
		select {
		case r := <-ch:
			if r.path != "/pool_warning" || r.body != "web v1 serving=2 leaving=1 threshold=2 site=test-site\n" {
				t.Errorf("%s got %s %q", name, r.path, r.body)
			}
		default:
			t.Errorf("no POST reached %s", name)
		}
	}
	select {
	case r := <-gotC:
		t.Errorf("the leaving backend c was warned: %q", r.body)
	default:
	}
	if got, want := f.events.take(), []string{"warning_started: warning a, b: needed to keep the threshold"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if v, ok := metrictest.Value(t, f.reg, "pollbal_group_serving"+group); !ok || v != 2 {
		t.Errorf("pollbal_group_serving = %v (present %t), want 2", v, ok)
	}
	if v, ok := metrictest.Value(t, f.reg, "pollbal_group_leaving"+group); !ok || v != 1 {
		t.Errorf("pollbal_group_leaving = %v (present %t), want 1", v, ok)
	}
	if got, _ := metrictest.Value(t, f.reg, "pollbal_warnings_sent_total"+group); got != 2 {
		t.Errorf("pollbal_warnings_sent_total = %v, want 2", got)
	}

	// A third serving backend: nobody is warned any more, the group stays with an empty list.
	f.members.set(web("a", addr(srvA), protocol.Serving), web("b", addr(srvB), protocol.Serving),
		web("c", addr(srvC), protocol.Leaving), web("d", closedAddr(t), protocol.Serving))
	f.round()
	want = []GroupState{{Pool: "p", Service: "web", Version: "v1", Serving: 3, Leaving: 1, Threshold: 2, Warned: []string{}}}
	if got := f.tr.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Groups() = %+v, want %+v", got, want)
	}
	if f.tr.Warned("a") || f.tr.Warned("b") {
		t.Error("a or b still warned with three serving")
	}
	if got, want := f.events.take(), []string{"warning_stopped: no longer warning a, b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if v, _ := metrictest.Value(t, f.reg, "pollbal_group_serving"+group); v != 3 {
		t.Errorf("pollbal_group_serving = %v, want 3", v)
	}

	// Nothing changed: no event.
	f.round()
	if got := f.events.take(); len(got) != 0 {
		t.Errorf("a round without changes recorded %q", got)
	}
}

func TestTrackerGroupsNeverNil(t *testing.T) {
	f := newTrackerFixture(t, trackerConfig("a"))
	if g := f.tr.Groups(); g == nil {
		t.Error("Groups() before any round is nil, want empty")
	}
	f.round()
	if g := f.tr.Groups(); g == nil || len(g) != 0 {
		t.Errorf("Groups() after a round without members = %#v, want empty", g)
	}
}

func TestTrackerIgnoresBackendsItsConfigDoesNotList(t *testing.T) {
	srv, got := recordingServer(t, http.StatusNoContent)
	f := newTrackerFixture(t, trackerConfig("a"))
	// The balancer took a configuration with x before the tracker: x counts for nothing yet.
	f.members.set(web("a", closedAddr(t), protocol.Serving), web("x", addr(srv), protocol.Serving))
	f.round()
	want := []GroupState{{Pool: "p", Service: "web", Version: "v1", Serving: 1, Threshold: 2, Warned: []string{"a"}}}
	if g := f.tr.Groups(); !reflect.DeepEqual(g, want) {
		t.Errorf("Groups() = %+v, want %+v", g, want)
	}
	if f.tr.Warned("x") {
		t.Error("x, which the tracker's configuration does not list, is warned")
	}
	select {
	case r := <-got:
		t.Errorf("x got a POST: %q", r.body)
	default:
	}
}

func TestTrackerUpdateAppliesPolicies(t *testing.T) {
	f := newTrackerFixture(t, trackerConfig("a", "b", "c"))
	f.members.set(web("a", closedAddr(t), protocol.Serving), web("b", closedAddr(t), protocol.Serving), web("c", closedAddr(t), protocol.Serving))
	f.round()
	if f.tr.Warned("a") {
		t.Fatal("three serving at threshold 2: a warned")
	}
	cfg := trackerConfig("a", "b", "c")
	cfg.Services["web"] = configs.Service{WarningThreshold: 3}
	f.tr.Update(cfg, nil)
	f.round()
	for _, id := range []string{"a", "b", "c"} {
		if !f.tr.Warned(id) {
			t.Errorf("after the reload to threshold 3, %s is not warned", id)
		}
	}
}

// TestTrackerForgetsRemovedBackends: a backend whose warnings failed leaves the configuration;
// its warned flag, its delivery state and its pollbal_warning_errors_total series go with it,
// without a warning_stopped event.
func TestTrackerForgetsRemovedBackends(t *testing.T) {
	f := newTrackerFixture(t, trackerConfig("gone", "kept"))
	kept, _ := recordingServer(t, http.StatusInternalServerError)
	f.members.set(web("gone", closedAddr(t), protocol.Serving), web("kept", addr(kept), protocol.Serving))
	f.round()
	for _, id := range []string{"gone", "kept"} {
		if !f.tr.Warned(id) {
			t.Fatalf("%s not warned: the scene is wrong", id)
		}
		if _, ok := metrictest.Value(t, f.reg, `pollbal_warning_errors_total{backend="`+id+`"}`); !ok {
			t.Fatalf("no pollbal_warning_errors_total{backend=%s} after a failed POST", id)
		}
	}
	f.events.take()

	f.tr.Update(trackerConfig("kept"), nil)
	if f.tr.Warned("gone") {
		t.Error("the removed backend is still warned")
	}
	if _, ok := metrictest.Value(t, f.reg, `pollbal_warning_errors_total{backend="kept"}`); !ok {
		t.Error("the kept backend's error series was dropped too")
	}
	if what := f.remembers(t, "gone"); what != "" {
		t.Errorf("after the removal the tracker still has the backend's %s", what)
	}

	// The balancer still lists it for a round (it takes the configuration after the tracker).
	f.round()
	if f.tr.Warned("gone") {
		t.Error("a round before the balancer's update warned the removed backend again")
	}
	if _, ok := metrictest.Value(t, f.reg, `pollbal_warning_errors_total{backend="gone"}`); ok {
		t.Error("a round before the balancer's update brought the removed backend's series back")
	}
	for _, e := range f.events.take() {
		if strings.Contains(e, "gone") {
			t.Errorf("event about the removed backend: %q", e)
		}
	}
}

// TestTrackerForgetsBackendRemovedWhilePostInFlight: a POST still in flight when its backend is
// removed fails afterwards; that failure must not bring the removed backend's series back.
func TestTrackerForgetsBackendRemovedWhilePostInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	f := newTrackerFixture(t, trackerConfig("slow"))
	f.members.set(web("slow", addr(srv), protocol.Serving))
	f.tr.Round()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the POST never arrived")
	}
	f.tr.Update(trackerConfig(), nil)
	close(release)
	f.tr.sender.wait()
	if what := f.remembers(t, "slow"); what != "" {
		t.Errorf("a POST that failed after the removal recorded the backend's %s", what)
	}
}

func TestNewTrackerErrors(t *testing.T) {
	tests := []struct {
		name string
		o    TrackerOptions
		want string
	}{
		{name: "no members", o: TrackerOptions{Config: trackerConfig()}, want: "nil members"},
		{name: "no config", o: TrackerOptions{Members: &fakeMembers{}}, want: "nil config"},
		{name: "no site", o: TrackerOptions{Members: &fakeMembers{}, Config: trackerConfig(), SenderOptions: SenderOptions{Timeout: time.Second}}, want: "site is empty"},
		{name: "no timeout", o: TrackerOptions{Members: &fakeMembers{}, Config: trackerConfig(), SenderOptions: SenderOptions{Site: "s"}}, want: "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTracker(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewTracker() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Issue 28: the warning panels showed "no data" until a first warning. Every configured
// backend has its error series from the start, and every group that can be warned its sent
// series from the first round that sees it, at 0.
func TestTrackerSeriesExistBeforeAnyWarning(t *testing.T) {
	f := newTrackerFixture(t, trackerConfig("a", "b", "c"))
	for _, id := range []string{"a", "b", "c"} {
		if _, ok := metrictest.Value(t, f.reg, `pollbal_warning_errors_total{backend="`+id+`"}`); !ok {
			t.Errorf("no pollbal_warning_errors_total{backend=%s} at start", id)
		}
	}
	group := `{pool="p",service="web",version="v1"}`
	if _, ok := metrictest.Value(t, f.reg, "pollbal_warnings_sent_total"+group); ok {
		t.Fatal("a sent series for a group no round has seen")
	}
	// Three serving at threshold 2: nobody is warned, and the group is known.
	f.members.set(web("a", closedAddr(t), protocol.Serving), web("b", closedAddr(t), protocol.Serving), web("c", closedAddr(t), protocol.Serving))
	f.round()
	if f.tr.Warned("a") || f.tr.Warned("b") || f.tr.Warned("c") {
		t.Fatal("a backend was warned: the scene is wrong")
	}
	if v, ok := metrictest.Value(t, f.reg, "pollbal_warnings_sent_total"+group); !ok || v != 0 {
		t.Error("no pollbal_warnings_sent_total series at 0 for the group the round saw")
	}
}
