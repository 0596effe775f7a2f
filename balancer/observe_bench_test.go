package balancer

import (
	"fmt"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/protocol"
)

// BenchmarkObserveStartup measures the cost of 2,000 backends becoming ready one after the
// other (every first check is a transition that rebuilds the snapshot), then of a steady round
// of unchanged checks.
func BenchmarkObserveStartup(b *testing.B) {
	const n = 2000
	var bs []configs.Backend
	for i := 0; i < n; i++ {
		bs = append(bs, configs.Backend{ID: fmt.Sprintf("b%04d", i), Owner: fmt.Sprintf("t%d", i%20)})
	}
	var apps []configs.App
	for i := 0; i < 20; i++ {
		apps = append(apps, configs.App{Name: fmt.Sprintf("app%d", i), Hosts: []string{fmt.Sprintf("a%d.test", i)}, Owner: fmt.Sprintf("t%d", i)})
	}
	reports := []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v1"}}
	b.Run("2000 transitions", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			bal := newTestBalancer(b, cfgOf(apps, bs), nil)
			for _, cb := range bs {
				bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: reports, Checked: time.Now()})
			}
		}
	})
	b.Run("2000 unchanged checks", func(b *testing.B) {
		bal := newTestBalancer(b, cfgOf(apps, bs), nil)
		for _, cb := range bs {
			bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: reports, Checked: time.Now()})
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, cb := range bs {
				bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: reports, Checked: time.Now()})
			}
		}
	})
}
