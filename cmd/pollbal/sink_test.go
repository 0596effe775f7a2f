package main

import (
	"testing"
	"time"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/poller"
	"pollbal/protocol"
)

// TestSinkObserveAllocsNothingOfItsOwn: the poller and the balancer share the report package's
// types, so the sink hands a check result over as it is. A check through the sink costs what
// balancer.Observe costs, without converting the reports or the load report on every check.
func TestSinkObserveAllocsNothingOfItsOwn(t *testing.T) {
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.example.com"}}},
		[]configs.Backend{{ID: "web-1", Address: "127.0.0.1:10001", Capacity: 8}},
		configtest.WarningThreshold(1), func(c *configs.Config) { c.Fleet.Instances = 2 })
	bal, err := balancer.New(balancer.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	reports := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}
	load := &protocol.Load{InFlight: 3, Capacity: 8, At: now}
	result := poller.Result{ID: "web-1", Address: "127.0.0.1:10001", Ready: true, Reports: reports, Load: load, Checked: now}
	obs := balancer.Observation{ID: "web-1", Address: "127.0.0.1:10001", Ready: true, Reports: reports, Load: load, Checked: now}
	k := sink{bal: bal}
	k.Observe(result) // the first check publishes; the runs below repeat it
	direct := testing.AllocsPerRun(200, func() { bal.Observe(obs) })
	viaSink := testing.AllocsPerRun(200, func() { k.Observe(result) })
	if viaSink != direct {
		t.Fatalf("a check through the sink allocates %.1f times, balancer.Observe alone %.1f: the sink converts per check", viaSink, direct)
	}
	if l := bal.Snapshot().Backends()[0].Load(); l == nil || l.InFlight != 3 || l.Capacity != 8 {
		t.Fatalf("the balancer kept load %+v, want in_flight 3 of 8", l)
	}
}
