package balancer

import (
	"fmt"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

// BenchmarkObserveStartup measures the cost of 2,000 backends in 20 pools becoming ready one
// after the other (every first check is a transition that changes the candidate sets of its
// pool), then of a steady round of unchanged checks, and of 10,000 backends of one pool
// becoming ready.
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
			bal := newTestBalancer(b, configtest.New(apps, bs), nil)
			for _, cb := range bs {
				bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: reports, Checked: time.Now()})
			}
		}
	})
	b.Run("2000 unchanged checks", func(b *testing.B) {
		bal := newTestBalancer(b, configtest.New(apps, bs), nil)
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
	b.Run("10000 transitions in one pool", func(b *testing.B) {
		var one []configs.Backend
		for i := 0; i < 10000; i++ {
			one = append(one, configs.Backend{ID: fmt.Sprintf("b%05d", i)})
		}
		cfg := configtest.New([]configs.App{{Name: "app", Hosts: []string{"*"}}}, one)
		for i := 0; i < b.N; i++ {
			bal := newTestBalancer(b, cfg, nil)
			for _, cb := range one {
				bal.Observe(Observation{ID: cb.ID, Ready: true, Reports: reports, Checked: time.Now()})
			}
		}
	})
}
