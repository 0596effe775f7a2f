package balancer

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
)

func benchBalancer(tb testing.TB, n int) (*Balancer, *Snapshot, *App) {
	return benchBalancerWith(tb, n, func(*configs.Config) {})
}

// benchBalancerQueue is benchBalancer with the queue on (queue_timeout 2s), nobody waiting.
func benchBalancerQueue(tb testing.TB, n int) (*Balancer, *Snapshot, *App) {
	return benchBalancerWith(tb, n, func(c *configs.Config) {
		c.Proxy.QueueTimeout = 2 * time.Second
		c.Proxy.MaxQueue = 1000
	})
}

func benchBalancerWith(tb testing.TB, n int, mutate func(*configs.Config)) (*Balancer, *Snapshot, *App) {
	var bs []configs.Backend
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("b%04d", i)
		bs = append(bs, configs.Backend{ID: id, Capacity: 1000})
		ids = append(ids, id)
	}
	cfg := configtest.New([]configs.App{{Name: "www", Hosts: []string{"*", "*.example.com"}}}, bs)
	mutate(cfg)
	bal := newTestBalancer(tb, cfg, nil)
	markReady(bal, ids)
	s := bal.Snapshot()
	return bal, s, s.AppByName("www")
}

// BenchmarkAcquire measures select + lease + release for pools of 4, 64 and 1,024 backends.
func BenchmarkAcquire(b *testing.B) {
	for _, n := range []int{4, 64, 1024} {
		b.Run(fmt.Sprintf("seq/backends=%d", n), func(b *testing.B) {
			bal, s, app := benchBalancer(b, n)
			benchAcquire(b, bal, s, app)
		})
		b.Run(fmt.Sprintf("parallel/backends=%d", n), func(b *testing.B) {
			bal, s, app := benchBalancer(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l, err := bal.Acquire(s, app, nil)
					if err != nil {
						b.Fatal(err)
					}
					l.Release()
				}
			})
		})
		// busy: every backend already holds leases of different depths, so the scan cannot stop
		// early at an idle backend: the worst case for ranking.
		b.Run(fmt.Sprintf("busy/backends=%d", n), func(b *testing.B) {
			bal, s, app := benchBalancer(b, n)
			holdDepths(s)
			benchAcquire(b, bal, s, app)
		})
	}
}

// benchAcquire times b.N selects + leases + releases on s for app, one after the other.
func benchAcquire(b *testing.B, bal *Balancer, s *Snapshot, app *App) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := bal.Acquire(s, app, nil)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// holdDepths has every member of s hold leases, 1 to 7 deep by its position.
func holdDepths(s *Snapshot) {
	for i, m := range s.members {
		m.slot.inFlight.Add(int64(1 + i%7))
	}
}

func TestAcquireDoesNotAllocate(t *testing.T) {
	bal, s, app := benchBalancer(t, 64)
	var tried Tried
	allocs := testing.AllocsPerRun(1000, func() {
		l, err := bal.Acquire(s, app, &tried)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	})
	if allocs != 0 {
		t.Fatalf("Acquire+Release allocates %.1f times per call, want 0", allocs)
	}
	if a := testing.AllocsPerRun(1000, func() { s.Route([]byte("Shop.Example.com:8080")) }); a != 0 {
		t.Fatalf("Route allocates %.1f times per call, want 0", a)
	}
}

// BenchmarkAcquirePlainScan is busy/ above with the block hints unused, as a plain scan of the
// pool without hints would do: the candidate sets are marked stale, so every pick reads every
// member. It measures what the hints save on busy pools (every backend holds leases).
func BenchmarkAcquirePlainScan(b *testing.B) {
	for _, n := range []int{4, 64, 1024} {
		b.Run(fmt.Sprintf("busy/backends=%d", n), func(b *testing.B) {
			bal, s, app := benchBalancer(b, n)
			holdDepths(s)
			for _, l := range s.lists {
				l.current().stale.Store(true)
			}
			benchAcquire(b, bal, s, app)
		})
	}
}

// BenchmarkNeighbourSlots has each goroutine lease and release on a backend of its own, the
// slots allocated one after the other as a configuration adds them: nothing is shared but what
// the memory layout shares. Run it with -cpu 2 or more; without a cache line per slot the
// goroutines' counts would sit on one line and every lease would wait for the other core.
func BenchmarkNeighbourSlots(b *testing.B) {
	var bs []configs.Backend
	for i := range 64 {
		bs = append(bs, configs.Backend{ID: fmt.Sprintf("b%02d", i), Address: fmt.Sprintf("127.0.0.1:%d", 20000+i), Capacity: 1000})
	}
	cfg := configtest.New(nil, bs)
	reg := map[string]*slot{}
	syncSlots(reg, cfg, nil)
	slots := make([]*slot, len(bs))
	for i, cb := range cfg.Backends {
		slots[i] = reg[configs.AddressKey(cb.Address)]
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := slots[int(next.Add(1)-1)%len(slots)]
		for pb.Next() {
			if s.tryAcquire(1000) == 0 {
				b.Error("slot full")
				return
			}
			s.release()
		}
	})
}
