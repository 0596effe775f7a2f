package balancer

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
)

// queueCfg is one app on backends of the given capacities, with the queue on.
func queueCfg(timeout time.Duration, maxQueue int, caps ...int) (*configs.Config, []string) {
	var bs []configs.Backend
	var ids []string
	for i, c := range caps {
		id := fmt.Sprintf("q%d", i)
		bs = append(bs, configs.Backend{ID: id, Capacity: c})
		ids = append(ids, id)
	}
	return configtest.New([]configs.App{{Name: "www", Hosts: []string{"*"}}}, bs, configtest.Queue(timeout, maxQueue)), ids
}

// get is what the proxy does: a lease at once, else a place in the queue.
func get(b *Balancer, gone func() bool) (Lease, error) {
	s := b.Snapshot()
	app := s.AppByName("www")
	if l, err := b.Acquire(s, app, nil); err == nil {
		return l, nil
	}
	return b.Wait(s, app, gone)
}

// The queue tests run in a testing/synctest bubble: the queue's timers and tickers run on the
// bubble's fake clock, synctest.Wait returns once every waiter is blocked in the queue, and
// the times below are exact.

// heldQueue is a balancer whose one backend, of capacity 1, is ready and busy with held: the
// next request queues (queue_timeout timeout, max_queue maxQueue).
func heldQueue(t *testing.T, timeout time.Duration, maxQueue int) (b *Balancer, held Lease) {
	t.Helper()
	cfg, ids := queueCfg(timeout, maxQueue, 1)
	b = newTestBalancer(t, cfg, nil)
	markReady(b, ids)
	held, err := get(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, held
}

func TestQueueFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, ids := queueCfg(10*time.Second, 100, 1)
		b := newTestBalancer(t, cfg, nil)
		markReady(b, ids)
		first, err := get(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				l, err := get(b, nil)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				l.Release()
			})
			synctest.Wait()
			if got := b.QueueLength("default"); got != i+1 {
				t.Fatalf("after waiter %d arrived: queue length %d, want %d", i, got, i+1)
			}
		}
		// A new arrival while requests wait queues behind them rather than taking a slot.
		if _, err := b.Acquire(b.Snapshot(), b.Snapshot().AppByName("www"), nil); !errors.Is(err, ErrBehindWaiters) {
			t.Fatalf("arrival while waiters queue: err %v, want ErrBehindWaiters", err)
		}
		first.Release()
		wg.Wait()
		want := []int{0, 1, 2, 3, 4, 5, 6, 7}
		if !slices.Equal(order, want) {
			t.Fatalf("served order %v, want %v", order, want)
		}
		if f := b.Snapshot().Backends()[0].InFlight(); f != 0 {
			t.Fatalf("in flight after all released: %d", f)
		}
	})
}

// TestQueueFull: with max_queue 1 and one waiter queued, the next arrival is refused at once.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, held := heldQueue(t, 80*time.Millisecond, 1)
		res := make(chan error, 1)
		go func() {
			l, err := get(b, nil)
			if err == nil {
				l.Release()
			}
			res <- err
		}()
		synctest.Wait()
		if n := b.QueueLength("default"); n != 1 {
			t.Fatalf("queue length %d, want the one waiter", n)
		}
		if _, err := get(b, nil); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("second waiter with max_queue 1: %v, want ErrQueueFull", err)
		}
		held.Release()
		if err := <-res; err != nil {
			t.Fatalf("waiter after the release: %v, want a lease", err)
		}
	})
}

// TestQueueTimeout: a waiter no slot frees for gets ErrQueueTimeout after exactly
// queue_timeout, leaves the queue, and its wait is observed.
func TestQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		cfg, ids := queueCfg(80*time.Millisecond, 1, 1)
		b, err := New(Options{Config: cfg, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		markReady(b, ids)
		held, err := get(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		began := time.Now()
		if _, err := get(b, nil); !errors.Is(err, ErrQueueTimeout) {
			t.Fatalf("waiter: %v, want ErrQueueTimeout", err)
		}
		if d := time.Since(began); d != 80*time.Millisecond {
			t.Fatalf("timed out after %v, want queue_timeout 80ms", d)
		}
		if n := b.QueueLength("default"); n != 0 {
			t.Fatalf("queue length after timeout: %d", n)
		}
		if n, _ := metrictest.Value(t, reg, `pollbal_queue_wait_seconds{pool="default"}`); n != 1 {
			t.Fatalf("pollbal_queue_wait_seconds{pool=default} counts %v waits, want 1", n)
		}
	})
}

func TestQueueOffOrNoReadyBackend(t *testing.T) {
	cfg, ids := queueCfg(0, 10, 1)
	b := newTestBalancer(t, cfg, nil)
	markReady(b, ids)
	held, _ := get(b, nil)
	defer held.Release()
	if _, err := get(b, nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("queue off: %v, want ErrNoCandidate at once", err)
	}

	cfg, _ = queueCfg(time.Minute, 10, 1)
	nb := newTestBalancer(t, cfg, nil) // never checked: no ready backend
	if _, err := get(nb, nil); !errors.Is(err, ErrNoCandidate) {
		t.Fatalf("no ready backend: %v, want ErrNoCandidate at once", err)
	}
}

// TestQueueClientGone: a waiter whose client went away leaves the queue at the next look,
// queueCheckEvery at most after, and the slot it would have had is not taken.
func TestQueueClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, held := heldQueue(t, time.Minute, 10)
		var gone atomic.Bool
		res := make(chan error, 1)
		go func() {
			_, err := get(b, gone.Load)
			res <- err
		}()
		synctest.Wait()
		time.Sleep(queueCheckEvery / 2) // the fake clock: half-way between two looks
		gone.Store(true)
		left := time.Now()
		if err := <-res; !errors.Is(err, ErrGone) {
			t.Fatalf("waiter whose client left: %v, want ErrGone", err)
		}
		if d := time.Since(left); d != queueCheckEvery/2 {
			t.Fatalf("left the queue %v after its client, want at the next look (%v)", d, queueCheckEvery/2)
		}
		if n := b.QueueLength("default"); n != 0 {
			t.Fatalf("queue length: %d", n)
		}
		held.Release()
		if f := b.Snapshot().Backends()[0].InFlight(); f != 0 {
			t.Fatalf("in flight after release: %d (slot handed to a gone waiter?)", f)
		}
	})
}

func TestQueueReloadWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, held := heldQueue(t, time.Minute, 10)
		defer held.Release()
		res := make(chan Lease, 1)
		go func() {
			l, err := get(b, nil)
			if err != nil {
				t.Error(err)
			}
			res <- l
		}()
		synctest.Wait()
		bigger, _ := queueCfg(time.Minute, 10, 2)
		b.Update(bigger)
		synctest.Wait()
		select {
		case l := <-res:
			if f := l.Backend.InFlight(); f != 2 {
				t.Fatalf("in flight with the woken waiter: %d, want 2", f)
			}
			l.Release()
		default:
			t.Fatal("a reload raising the capacity did not wake the waiter")
		}
	})
}

// TestQueueNeverOversubscribes: many workers against a full queue; no backend ever holds more
// leases than its capacity, and both queued service and queue_full refusals happen.
func TestQueueNeverOversubscribes(t *testing.T) {
	cfg, ids := queueCfg(time.Second, 4, 2, 3)
	b := newTestBalancer(t, cfg, nil)
	markReady(b, ids)
	caps := map[string]int64{"q0": 2, "q1": 3}
	var served, full, timedOut, over atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l, err := get(b, nil)
				switch {
				case errors.Is(err, ErrQueueFull):
					full.Add(1)
					continue
				case errors.Is(err, ErrQueueTimeout):
					timedOut.Add(1)
					continue
				case err != nil:
					t.Error(err)
					return
				}
				if f := l.Backend.InFlight(); f > caps[l.Backend.ID] {
					over.Add(1)
				}
				served.Add(1)
				time.Sleep(200 * time.Microsecond) // the request's work (a service time, not a wait for an event)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 {
		t.Fatalf("%d leases found their backend above capacity", over.Load())
	}
	if served.Load() == 0 || full.Load() == 0 {
		t.Fatalf("served %d, queue_full %d: want both > 0", served.Load(), full.Load())
	}
	for _, be := range b.Snapshot().Backends() {
		if f := be.InFlight(); f != 0 {
			t.Fatalf("%s in flight after the run: %d", be.ID, f)
		}
	}
	if n := b.QueueLength("default"); n != 0 {
		t.Fatalf("queue length after the run: %d", n)
	}
	t.Logf("served %d, queue_full %d, queue_timeout %d", served.Load(), full.Load(), timedOut.Load())
}

// BenchmarkAcquireQueueOn is select + lease + release with the queue on but empty.
func BenchmarkAcquireQueueOn(b *testing.B) {
	for _, n := range []int{4, 64, 1024} {
		b.Run(fmt.Sprintf("seq/backends=%d", n), func(b *testing.B) {
			bal, s, app := benchBalancerQueue(b, n)
			benchAcquire(b, bal, s, app)
		})
	}
}
