package poller

import (
	"testing"
	"time"

	"pollbal/protocol"
)

// A target seeded ready goes through its checks under the usual fall rule: with fall 2 its
// first failed check keeps it ready with the seeded reports, the second makes it not ready.
// A target seeded not ready, or not at all, starts as usual: its first good check makes it
// ready at once whatever rise says.
func TestSeed(t *testing.T) {
	failing := newBackend(t, step{status: 500})
	good := newBackend(t, step{body: "web serving v2\n"})
	fresh := newBackend(t, step{body: "web serving v1\n"})
	s := scriptedSettings()
	s.Fall, s.Rise = 2, 3
	sink := newFakeSink()
	p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{
		{ID: "failing", Address: failing.addr}, {ID: "good", Address: good.addr}, {ID: "fresh", Address: fresh.addr},
	}})
	seeded := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}
	load := &protocol.Load{InFlight: 3, Capacity: 10, At: time.Now()}
	n := p.Seed([]Result{
		{ID: "failing", Address: failing.addr, Ready: true, Reports: seeded, Load: load},
		{ID: "good", Address: good.addr, Ready: true, Reports: seeded},
		{ID: "fresh", Address: fresh.addr, Ready: false, Reason: "status 500"},
		{ID: "gone", Address: "127.0.0.1:1", Ready: true},
		{ID: "good", Address: "127.0.0.1:2", Ready: true}, // same id, another address: not this target
	})
	if n != 2 {
		t.Fatalf("Seed seeded %d targets, want 2", n)
	}
	start(t, p)

	first := sink.waitResult(t, "failing's first check", func(r Result) bool { return r.ID == "failing" })
	if !first.Ready || first.Reason != "status 500" || !protocol.EqualReports(first.Reports, seeded) || first.Load != load {
		t.Errorf("after one failed check with fall 2: %+v, want still ready with the seeded reports and load", first)
	}
	second := sink.waitResult(t, "failing's second check", func(r Result) bool { return r.ID == "failing" })
	if second.Ready {
		t.Errorf("after two failed checks with fall 2: %+v, want not ready", second)
	}
	g := sink.waitResult(t, "good's first check", func(r Result) bool { return r.ID == "good" })
	if !g.Ready || len(g.Reports) != 1 || g.Reports[0].Version != "v2" {
		t.Errorf("good: %+v, want ready with its new answer", g)
	}
	f := sink.waitResult(t, "fresh's first check", func(r Result) bool { return r.ID == "fresh" })
	if !f.Ready {
		t.Errorf("fresh: %+v, want ready on its first good check although rise is 3", f)
	}
	if p.Seed([]Result{{ID: "fresh", Address: fresh.addr, Ready: true}}) != 0 {
		t.Error("Seed after Run seeded a target")
	}
}
