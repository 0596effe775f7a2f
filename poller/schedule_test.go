package poller

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The scheduling tests run in a testing/synctest bubble with fakeTransport answering the
// checks: the clock is fake, a check takes no time, and every time below is exact. Inside the
// bubble time.Sleep only advances the fake clock, and synctest.Wait lets every check that is due
// by then finish.

// advance moves the bubble's clock on by d and waits for what became due.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// TestSpreadStart: target i of n first starts i*interval/n after Run starts, and each next
// check one interval after the last one started.
func TestSpreadStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		s := fastSettings()
		s.Interval, s.MaxBackoff = 2*time.Second, 2*time.Second
		scripts := map[string][]step{}
		var targets []Target
		for i := range n {
			addr := fmt.Sprintf("fake-%d:80", i)
			scripts[addr] = []step{{body: "web"}}
			targets = append(targets, Target{ID: string(rune('a' + i)), Address: addr})
		}
		ft := newFakeTransport(scripts)
		p := newPoller(t, Options{Settings: s, Sink: newFakeSink(), Targets: targets, transport: ft})
		began := time.Now()
		start(t, p)
		advance(s.Interval + s.Interval/8)
		for i, tg := range targets {
			want := []time.Duration{offset(i, n, s.Interval)}
			if i == 0 {
				want = append(want, s.Interval)
			}
			if got := ft.hits(tg.Address, began); !slices.Equal(got, want) {
				t.Errorf("target %s checked at %v, want %v", tg.ID, got, want)
			}
		}
	})
}

// TestBackoff: while the backend fails, the gaps between checks are the interval, then
// doubling up to max_backoff; after a good check, the interval again.
func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scriptedSettings()
		s.MaxBackoff = 2400 * time.Millisecond
		fail := step{status: 503}
		ft := newFakeTransport(map[string][]step{"fake:80": {fail, fail, fail, fail, fail, {body: "web"}}})
		p := newPoller(t, Options{Settings: s, Sink: newFakeSink(), Targets: []Target{{ID: "b", Address: "fake:80"}}, transport: ft})
		began := time.Now()
		start(t, p)
		ms := time.Millisecond
		gaps := []time.Duration{300 * ms, 600 * ms, 1200 * ms, 2400 * ms, 2400 * ms, 300 * ms, 300 * ms}
		want := []time.Duration{0}
		for _, g := range gaps {
			want = append(want, want[len(want)-1]+g)
		}
		advance(want[len(want)-1] + 100*ms)
		if got := ft.hits("fake:80", began); !slices.Equal(got, want) {
			t.Errorf("checks at %v, want %v (gaps %v)", got, want, gaps)
		}
	})
}

// TestRoundDone: the first RoundDone comes once every target's first check has completed, and
// then one every interval.
func TestRoundDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fastSettings()
		s.Interval, s.Timeout, s.MaxBackoff = 2*time.Second, 1900*time.Millisecond, 2*time.Second
		ft := newFakeTransport(map[string][]step{
			"fast1:80": {{body: "web"}}, "slow:80": {{body: "web", hold: true}, {body: "web"}}, "fast2:80": {{body: "web"}},
		})
		sink := newFakeSink()
		p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{
			{ID: "fast1", Address: "fast1:80"}, {ID: "slow", Address: "slow:80"}, {ID: "fast2", Address: "fast2:80"}}, transport: ft})
		start(t, p)
		t.Cleanup(ft.unblock)       // before the cleanup that stops p, which waits for the held check
		advance(s.Interval * 3 / 4) // fast2's first check, at 2/3 of the interval, is done; slow's is held
		select {
		case at := <-sink.rounds:
			t.Fatalf("RoundDone(%v) before the slow target's first check completed", at)
		default:
		}
		if got := len(ft.hits("fast2:80", time.Time{})); got != 1 {
			t.Fatalf("fast2 checked %d times, want once", got)
		}
		ft.unblock()
		synctest.Wait()
		released := time.Now()
		advance(2*s.Interval + s.Interval/4)
		var rounds []time.Time
		for len(sink.rounds) > 0 {
			rounds = append(rounds, <-sink.rounds)
		}
		want := []time.Time{released, released.Add(s.Interval), released.Add(2 * s.Interval)}
		if !slices.EqualFunc(rounds, want, time.Time.Equal) {
			t.Errorf("RoundDone at %v, want %v", rounds, want)
		}
	})
}

// TestUpdateInterval applies a shorter interval to a target waiting for its next check: the
// next check comes the new interval after the last one started.
func TestUpdateInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fastSettings()
		s.Interval, s.MaxBackoff = 5*time.Second, 5*time.Second
		ft := newFakeTransport(map[string][]step{"fake:80": {{body: "web"}}})
		sink := newFakeSink()
		targets := []Target{{ID: "b", Address: "fake:80"}}
		p := newPoller(t, Options{Settings: s, Sink: sink, Targets: targets, transport: ft})
		began := time.Now()
		start(t, p)
		advance(time.Second)
		s.Interval = 100 * time.Millisecond
		p.Update(s, targets)
		advance(time.Second)
		want := []time.Duration{0}
		for at := time.Second; at <= 2*time.Second; at += s.Interval {
			want = append(want, at)
		}
		if got := ft.hits("fake:80", began); !slices.Equal(got, want) {
			t.Errorf("checks at %v, want %v", got, want)
		}
	})
}

// TestConfirm checks a Sink's confirmation checks (Sink.ConfirmAfter): asked after a good
// check, one more check comes that soon, and again after it, up to maxConfirms in a row
// (ConfirmAfter is not even asked after the last); the next regular check keeps the phase, one
// interval after the check that first asked.
func TestConfirm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fastSettings()
		s.Interval, s.Timeout, s.MaxBackoff = 2500*time.Millisecond, time.Second, 2500*time.Millisecond
		// Regular, regular asking (1), maxConfirms confirmations asking again (1), then regular
		// checks that do not ask.
		steps := []step{{body: "web", load: "5/8"}}
		for range 1 + maxConfirms {
			steps = append(steps, step{body: "web", load: "1/8"})
		}
		ft := newFakeTransport(map[string][]step{"fake:80": append(steps, step{body: "web", load: "5/8"})})
		sink := &confirmSink{fakeSink: newFakeSink(), after: 100 * time.Millisecond}
		p := newPoller(t, Options{Settings: s, Sink: sink, Targets: []Target{{ID: "b", Address: "fake:80"}}, transport: ft})
		began := time.Now()
		start(t, p)
		var want []time.Duration
		want = append(want, 0, s.Interval) // regular, regular that asks
		for i := range maxConfirms {
			want = append(want, s.Interval+time.Duration(i+1)*sink.after)
		}
		want = append(want, 2*s.Interval, 3*s.Interval) // the phase is kept
		advance(3*s.Interval + s.Interval/2)
		if got := ft.hits("fake:80", began); !slices.Equal(got, want) {
			t.Errorf("checks at %v, want %v", got, want)
		}
		// Asked after every good check but the last confirmation.
		if got, wantAsked := sink.asked.Load(), int64(len(want)-1); got != wantAsked {
			t.Errorf("ConfirmAfter asked %d times over %d checks, want %d (not after the last confirmation)", got, len(want), wantAsked)
		}
	})
}
