package main

// End-to-end tests of one capacity shared by a fleet of pollbal instances: three instances in
// front of two example backends of capacity 8, with the backends' load reports, with a static
// split, and as pollbal behaved before fleets (every instance taking the whole capacity).

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pollbal/internal/testproc"
)

const (
	fleetCapacity  = 8                      // per backend, for the whole fleet
	fleetBackends  = 2                      // so the fleet has 16 slots
	fleetInstances = 3                      // pollbal instances (three sites)
	fleetClients   = 24                     // concurrent clients per instance: 72 for 16 slots
	fleetDelay     = 100 * time.Millisecond // how long each request holds its slot on the backend
	// fleetBackoff is how long a client waits after a 503 before asking again (it honours the
	// spirit of Retry-After without idling for a whole second).
	fleetBackoff = 20 * time.Millisecond
	// fleetWait bounds each wait for a limit to move: many intervals, so that only a limit
	// that never moves fails, never a slow machine.
	fleetWait = 20 * time.Second
)

// fleetDuration is how long each load run lasts: long enough for every instance's limits to
// move many times; the figures it prints are not held.
func fleetDuration() time.Duration {
	return 3 * time.Second
}

// fleetState is the part of /api/state these tests read.
type fleetState struct {
	Backends []struct {
		ID       string `json:"id"`
		Ready    bool   `json:"ready"`
		InFlight int64  `json:"in_flight"`
		Limit    int64  `json:"limit"`
		Load     *struct {
			InFlight int64 `json:"in_flight"`
			Capacity int64 `json:"capacity"`
			AgeMs    int64 `json:"age_ms"`
		} `json:"load"`
	} `json:"backends"`
}

func fleetConfig(instances int, interval time.Duration, addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `site: e2e
listen: LISTEN
admin:
  listen: ADMIN
poll:
  interval: %s
  timeout: %s
  max_backoff: %s
proxy:
  backend_timeout: 5s
fleet:
  instances: %d
services:
  web: {}
apps:
  - name: www
    hosts: ["*"]
backends:
`, interval, interval*3/4, 2*interval, instances)
	for i, a := range addrs {
		fmt.Fprintf(&b, "  - id: b%d\n    address: %s\n    capacity: %d\n", i+1, a, fleetCapacity)
	}
	return b.String()
}

// fleet is a running set of backends and pollbal instances.
type fleet struct {
	backends  []*backend
	instances []*instance
}

// startFleet starts the backends (with backendArgs) and the pollbal instances, and returns
// once every instance sees every backend ready.
func startFleet(t *testing.T, instances int, interval time.Duration, backendArgs ...string) *fleet {
	t.Helper()
	f := &fleet{}
	var addrs []string
	for i := range fleetBackends {
		args := append([]string{"-delay", fleetDelay.String()}, backendArgs...)
		b := startBackend(t, fmt.Sprintf("b%d", i+1), "127.0.0.1:0", "web serving v1\n", args...)
		f.backends = append(f.backends, b)
		addrs = append(addrs, b.addr)
	}
	cfg := fleetConfig(instances, interval, addrs)
	for range fleetInstances {
		f.instances = append(f.instances, startPollbal(t, cfg))
	}
	for _, in := range f.instances {
		testproc.WaitFor(t, 10*time.Second, "every backend ready", func() bool {
			s := in.fleetState(t)
			for _, b := range s.Backends {
				if !b.Ready {
					return false
				}
			}
			return len(s.Backends) == fleetBackends
		})
	}
	return f
}

func (in *instance) fleetState(t testing.TB) fleetState {
	t.Helper()
	var s fleetState
	getJSON(t, "http://"+in.admin+"/api/state", &s)
	return s
}

// load is fleetClients closed-loop clients against one instance until stop is closed.
type load struct {
	ok, other atomic.Int64
	stop      chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
}

func startLoad(t *testing.T, in *instance) *load {
	t.Helper()
	l := &load{stop: make(chan struct{})}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: fleetClients, MaxConnsPerHost: fleetClients}}
	t.Cleanup(c.CloseIdleConnections)
	t.Cleanup(l.end) // a test that fails half way still stops its clients
	url := "http://" + in.listen + "/"
	for range fleetClients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			wait := time.NewTimer(0)
			defer wait.Stop()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					t.Error(err)
					return
				}
				req.Host = "www.test"
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("request: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					l.ok.Add(1)
					continue
				}
				l.other.Add(1)
				wait.Reset(fleetBackoff)
				select {
				case <-l.stop:
					return
				case <-wait.C:
				}
			}
		}()
	}
	return l
}

// end stops the clients and waits for them; it may be called more than once.
func (l *load) end() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// fleetRun is what one load run measured.
type fleetRun struct {
	name                 string
	ok, other            int64
	forwards, refused    int64
	peaks                []int64
	seconds              float64
	okPerSec, idealPerSe float64 // successful req/s, and what 16 slots serve
}

func (r fleetRun) refusedPct() float64 {
	if r.forwards == 0 {
		return 0
	}
	return 100 * float64(r.refused) / float64(r.forwards)
}

func (r fleetRun) maxPeak() int64 {
	var m int64
	for _, p := range r.peaks {
		m = max(m, p)
	}
	return m
}

// fleetWarmUp is how long the clients run before the counters are read the first time: the
// first second holds the start, when every instance's first reports show idle backends.
const fleetWarmUp = time.Second

// runFleetLoad loads every instance with fleetClients clients for fleetWarmUp + d and measures
// over d: the clients' answers and the backends' own counters. The backends' peaks cover the
// whole run, the start included.
func runFleetLoad(t *testing.T, name string, f *fleet, d time.Duration) fleetRun {
	t.Helper()
	var loads []*load
	for _, in := range f.instances {
		loads = append(loads, startLoad(t, in))
	}
	read := func() (r fleetRun) {
		for _, l := range loads {
			r.ok += l.ok.Load()
			r.other += l.other.Load()
		}
		for _, b := range f.backends {
			s := b.stats(t)
			r.peaks = append(r.peaks, s.LoadPeak)
			r.refused += s.Refused
			r.forwards += s.Requests + s.Refused
		}
		return r
	}
	<-time.After(fleetWarmUp)
	start, from := time.Now(), read()
	<-time.After(d)
	to := read()
	elapsed := time.Since(start).Seconds()
	for _, l := range loads {
		l.end()
	}
	r := fleetRun{name: name, seconds: elapsed, idealPerSe: fleetCapacity * fleetBackends / fleetDelay.Seconds(),
		ok: to.ok - from.ok, other: to.other - from.other, refused: to.refused - from.refused,
		forwards: to.forwards - from.forwards}
	for _, b := range f.backends {
		r.peaks = append(r.peaks, b.stats(t).LoadPeak) // after the clients stopped: the whole run
	}
	r.okPerSec = float64(r.ok) / elapsed
	return r
}

// TestEndToEndFleetSharesCapacity runs three pollbal instances, each loaded with 24 concurrent
// clients, in front of two example backends of capacity 8 (16 slots for 72 clients), three
// ways: with the backends' load reports (fleet.instances: 3), with a static split (the backends
// enforce their capacity but report nothing), and as pollbal behaved before fleets
// (fleet.instances: 1, backends that neither report nor refuse). It holds the fleet to the
// capacity; the figures are printed side by side, not held.
func TestEndToEndFleetSharesCapacity(t *testing.T) {
	d := fleetDuration()
	interval := 200 * time.Millisecond
	var runs []fleetRun

	f := startFleet(t, fleetInstances, interval, "-capacity", fmt.Sprint(fleetCapacity))
	reports := runFleetLoad(t, "load reports (fleet.instances: 3)", f, d)
	runs = append(runs, reports)

	f = startFleet(t, fleetInstances, interval, "-capacity", fmt.Sprint(fleetCapacity), "-no-load-report")
	static := runFleetLoad(t, "static split (no reports)", f, d)
	runs = append(runs, static)

	f = startFleet(t, 1, interval)
	before := runFleetLoad(t, "before fleets (fleet.instances: 1)", f, d)
	runs = append(runs, before)

	var table strings.Builder
	fmt.Fprintf(&table, "\n%d instances x %d clients, %d backends of capacity %d, %s per request, %.1fs per run; 16 slots serve %.0f req/s\n",
		fleetInstances, fleetClients, fleetBackends, fleetCapacity, fleetDelay, d.Seconds(), reports.idealPerSe)
	fmt.Fprintf(&table, "(measured over the %.1fs after a %s warm-up; peaks over the whole run)\n", d.Seconds(), fleetWarmUp)
	fmt.Fprintf(&table, "%-38s %10s %8s %12s %10s %9s %14s\n", "run", "ok req/s", "% of 16", "peak/backend", "forwards", "refused", "client non-200")
	for _, r := range runs {
		fmt.Fprintf(&table, "%-38s %10.1f %7.1f%% %12s %10d %8.2f%% %14d\n", r.name, r.okPerSec, 100*r.okPerSec/r.idealPerSe,
			strings.Trim(strings.Join(strings.Fields(fmt.Sprint(r.peaks)), "/"), "[]"), r.forwards, r.refusedPct(), r.other)
	}
	t.Log(table.String())

	for _, r := range []fleetRun{reports, static} {
		if r.maxPeak() > fleetCapacity {
			t.Errorf("%s: a backend had %d requests in progress, over its capacity %d", r.name, r.maxPeak(), fleetCapacity)
		}
	}
	// How many forwards are refused and how close the fleet comes to what 16 slots serve are
	// figures for the harness, not bounds for this test (bench/TUNING.md, "Fleet pacing").
	for _, r := range runs {
		if r.ok == 0 {
			t.Errorf("%s: no client got an answer", r.name)
		}
	}
	if before.maxPeak() <= fleetCapacity {
		t.Errorf("before fleets: peak per backend %v, expected above %d (each instance took the whole capacity)", before.peaks, fleetCapacity)
	}
}

// TestEndToEndFleetIdleAndBusy checks how the limit moves between instances: once the others
// go idle, a busy instance's limit grows to the whole spare capacity; once another instance is
// busy again, the first one gives slots back and the other is served. How fast each step comes
// (one interval to grow, two to give back) is held by the balancer's fleet tests on a fake
// clock; the waits here are generous so a loaded machine cannot fail them.
func TestEndToEndFleetIdleAndBusy(t *testing.T) {
	interval := 500 * time.Millisecond
	f := startFleet(t, fleetInstances, interval, "-capacity", fmt.Sprint(fleetCapacity))
	a, b := f.instances[0], f.instances[1]
	limits := func(in *instance) []int64 {
		var out []int64
		for _, bs := range in.fleetState(t).Backends {
			out = append(out, bs.Limit)
		}
		return out
	}
	every := func(ls []int64, ok func(int64) bool) bool {
		for _, l := range ls {
			if !ok(l) {
				return false
			}
		}
		return len(ls) == fleetBackends
	}

	// All three busy: the capacity is split between them.
	la, lb, lc := startLoad(t, a), startLoad(t, b), startLoad(t, f.instances[2])
	testproc.WaitFor(t, fleetWait, "a's limit below the capacity while all three are busy", func() bool {
		return every(limits(a), func(l int64) bool { return l < fleetCapacity })
	})
	t.Logf("all three busy: a's limits %v, b's %v", limits(a), limits(b))

	// b and c go idle: once their requests have ended, a's next report leaves it everything.
	lb.end()
	lc.end()
	grow := testproc.WaitFor(t, fleetWait, "a's limit to grow to the whole capacity", func() bool {
		return every(limits(a), func(l int64) bool { return l == fleetCapacity })
	})
	t.Logf("b and c idle: a's limits %v after %s (interval %s, requests last %s)", limits(a), grow.Round(time.Millisecond), interval, fleetDelay)
	testproc.WaitFor(t, fleetWait, "a to use the whole capacity", func() bool {
		for _, bk := range f.backends {
			if bk.stats(t).LoadInFlight < fleetCapacity-1 {
				return false
			}
		}
		return true
	})

	// b is busy again: its limit is 0 while a holds everything; a's next report (full, a
	// holding it all) gives one slot back, b's next report shows it free (and the check that
	// confirms it), b takes it, and a's next report counts b's request.
	lb = startLoad(t, b)
	busy := time.Now()
	shrink := testproc.WaitFor(t, fleetWait, "a's limit to give b a slot back", func() bool {
		return every(limits(a), func(l int64) bool { return l < fleetCapacity })
	})
	served := testproc.WaitFor(t, fleetWait, "b to be served", func() bool { return lb.ok.Load() > 0 }) + shrink
	t.Logf("b busy again: a's limits %v, b's %v; a gave back after %s, b served after %s",
		limits(a), limits(b), shrink.Round(time.Millisecond), served.Round(time.Millisecond))
	testproc.WaitFor(t, fleetWait, "a to give back two slots on each backend", func() bool {
		return every(limits(a), func(l int64) bool { return l <= fleetCapacity-2 })
	})
	t.Logf("a's limits %v, b's %v, %s after b became busy", limits(a), limits(b), time.Since(busy).Round(time.Millisecond))
	la.end()
	lb.end()
	for _, bk := range f.backends {
		if s := bk.stats(t); s.LoadPeak > fleetCapacity {
			t.Errorf("backend had %d requests in progress, over its capacity %d", s.LoadPeak, fleetCapacity)
		}
	}
}
