package balancer

import (
	"errors"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/testproc"
)

// Regression: while any request waited in any queue, a first try returned "no candidate" before
// looking at its pool, so that it would queue; a request whose pool (and fallback) has no ready
// backend cannot queue and was answered 503 pool_exhausted without the alarm or its counter.
// Acquire tells the two apart: ErrBehindWaiters for a request that can queue behind the
// waiters, ErrNoCandidate for one whose pool is exhausted, which the proxy reports (Exhausted).
func TestExhaustedAlarmWhileOthersWait(t *testing.T) {
	cfg := configtest.New([]configs.App{
		{Name: "www", Hosts: []string{"www"}, Pool: "busy"},
		{Name: "shop", Hosts: []string{"shop"}, Pool: "dark"},
	}, []configs.Backend{
		{ID: "b1", Pool: "busy", Capacity: 1},
		{ID: "d1", Pool: "dark", Capacity: 1},
	})
	cfg.Proxy.QueueTimeout = 10 * time.Second
	cfg.Proxy.MaxQueue = 10
	b := newTestBalancer(t, cfg, nil)
	markReady(b, []string{"b1"}) // d1 is never checked: "dark" has no ready backend
	s := b.Snapshot()
	www := s.AppByName("www")
	held, err := b.Acquire(s, www, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan Lease, 1)
	go func() {
		l, err := b.Wait(s, www, nil)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		served <- l
	}()
	testproc.WaitFor(t, 10*time.Second, "a waiter in busy", func() bool { return b.QueueLength("busy") == 1 })

	if _, err := b.Acquire(s, www, nil); !errors.Is(err, ErrBehindWaiters) {
		t.Fatalf("a first try of busy while one waits: %v, want ErrBehindWaiters", err)
	}
	shop := s.AppByName("shop")
	if _, err := b.Acquire(s, shop, nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("a first try of a pool with none ready: %v, want ErrNoCandidate", err)
	}
	if _, err := b.Wait(s, shop, nil); err != ErrNoCandidate {
		t.Fatalf("Wait for a pool with no ready backend: %v, want ErrNoCandidate", err)
	}
	held.Release()
	l := <-served
	l.Release()
}
