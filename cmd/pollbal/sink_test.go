package main

import (
	"testing"
	"time"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/poller"
	"pollbal/protocol"
)

// TestSinkObserveAllocsNothingOfItsOwn: the poller and the balancer share the report package's
// types, so the sink hands a check result over as it is. A check through the sink costs what
// balancer.Observe costs, without converting the reports or the load report on every check.
func TestSinkObserveAllocsNothingOfItsOwn(t *testing.T) {
	cfg := &configs.Config{
		Site:     "s",
		Listen:   "127.0.0.1:8080",
		Admin:    configs.Admin{Listen: "127.0.0.1:9090"},
		Poll:     configs.Poll{Interval: time.Second, Timeout: 800 * time.Millisecond, Fall: 1, Rise: 1, MaxBackoff: 5 * time.Second, MaxBody: 4096},
		Warning:  configs.Warning{Timeout: 500 * time.Millisecond},
		Proxy:    configs.Proxy{BackendTimeout: 30 * time.Second, MaxRequestBody: 1 << 20, Retries: 1, EjectAfter: 3, TieBreak: configs.TieBreakRotate},
		Fleet:    configs.Fleet{Instances: 2},
		Services: map[string]configs.Service{"web": {WarningThreshold: 1}},
		Apps:     []configs.App{{Name: "shop", Hosts: []string{"shop.example.com"}, Service: "web"}},
		Backends: []configs.Backend{{ID: "web-1", Address: "127.0.0.1:10001", Capacity: 8}},
		Alarms:   configs.Alarms{DedupWindow: time.Minute},
	}
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
