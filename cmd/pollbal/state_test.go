package main

import (
	"reflect"
	"testing"
	"time"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/runstate"
	"pollbal/protocol"
	"pollbal/warning"
)

// What a state file entry says goes into the balancer whole (toRuntime, balancer.Restore) and
// comes back out whole (captureState): readiness, reason, reports, ignored services, check
// time, slow start, every field of the load report, ejection, fail streak and the warned flag.
func TestStateConversionsKeepEveryField(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"*"}}},
		[]configs.Backend{{ID: "web-1", Address: "127.0.0.1:10001", Capacity: 8}, {ID: "web-2", Address: "127.0.0.1:10002", Capacity: 8}},
		configtest.Site("s"), configtest.WarningThreshold(1), func(c *configs.Config) { c.Fleet.Instances = 2 })
	bal, err := balancer.New(balancer.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	warn, err := warning.NewTracker(warning.TrackerOptions{Members: bal, Config: cfg, SenderOptions: warning.SenderOptions{Site: "s", Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(warn.Close)
	s := &server{bal: bal, warn: warn}

	want := []runstate.Backend{
		{
			Address: "127.0.0.1:10001", ID: "web-1", Ready: true, Reason: "timeout after 800ms",
			Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v3"}},
			Ignored: []string{"db"}, Checked: at, ReadySince: at.Add(-time.Minute),
			Load:       &runstate.Load{InFlight: 5, Capacity: 8, At: at, MineThen: 2, LimitThen: 6, PrevOthers: 4, PrevAt: at.Add(-time.Second)},
			Ejected:    true,
			FailStreak: 3,
			Warned:     true,
		},
		{Address: "127.0.0.1:10002", ID: "web-2", Reason: "status 500", Checked: at},
	}
	saved := make([]balancer.Runtime, len(want))
	for i, b := range want {
		saved[i] = toRuntime(b)
	}
	if n := bal.Restore(saved); n != 2 {
		t.Fatalf("restored %d backends, want 2", n)
	}
	warn.Seed([]string{"web-1"})
	if got := s.captureState(); !reflect.DeepEqual(got, want) {
		t.Errorf("captured:\n got  %+v\n want %+v", got, want)
		for i := range got {
			if got[i].Load != nil {
				t.Logf("load %d: %+v", i, *got[i].Load)
			}
		}
	}
}
