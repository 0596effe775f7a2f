package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	const (
		limit = 100 * time.Millisecond
		gen   = 10 // the generation the scan started
		now   = time.Second
	)
	busyAt := func(g uint64) uint64 { return g<<stateGenShift | stateBusy }
	tests := []struct {
		name      string
		state     uint64
		seen      uint64
		since     time.Duration
		limit     time.Duration
		wantSince time.Duration
		wantSeen  uint64
		wantCut   bool
	}{
		{name: "idle keep-alive connection is left alone however old", state: 3 << stateGenShift, seen: busyAt(3), since: 0, limit: limit,
			wantSince: 0, wantSeen: busyAt(3)},
		{name: "new request from an older generation is tracked from now", state: busyAt(9), seen: busyAt(3), since: 0, limit: limit,
			wantSince: now, wantSeen: busyAt(9)},
		{name: "new request of the current generation waits for the next scan", state: busyAt(gen), seen: busyAt(3), since: 0, limit: limit,
			wantSince: 0, wantSeen: busyAt(3)},
		{name: "tracked request under the limit stays", state: busyAt(9), seen: busyAt(9), since: now - limit + time.Millisecond, limit: limit,
			wantSince: now - limit + time.Millisecond, wantSeen: busyAt(9)},
		{name: "tracked request at the limit is cut", state: busyAt(9), seen: busyAt(9), since: now - limit, limit: limit,
			wantSince: now - limit, wantSeen: busyAt(9), wantCut: true},
		{name: "first request is tracked from its dial", state: busyAt(9) | stateFirst, seen: busyAt(9) | stateFirst, since: now - 2*limit, limit: limit,
			wantSince: now - 2*limit, wantSeen: busyAt(9) | stateFirst, wantCut: true},
		{name: "second request after the first is a new request", state: busyAt(9), seen: busyAt(9) | stateFirst, since: now - 2*limit, limit: limit,
			wantSince: now, wantSeen: busyAt(9)},
		{name: "waiting again for more of the same response keeps its start", state: busyAt(5), seen: busyAt(5), since: now - limit, limit: limit,
			wantSince: now - limit, wantSeen: busyAt(5), wantCut: true},
		{name: "no timeout configured never cuts", state: busyAt(1), seen: busyAt(1), since: 0, limit: 0,
			wantSince: 0, wantSeen: busyAt(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			since, seen, cut := judge(tt.state, tt.seen, tt.since, gen, now, tt.limit)
			if since != tt.wantSince || seen != tt.wantSeen || cut != tt.wantCut {
				t.Errorf("judge = (%v, %#x, %v), want (%v, %#x, %v)", since, seen, cut, tt.wantSince, tt.wantSeen, tt.wantCut)
			}
		})
	}
}

// TestCutNeverHitsTheNextForward plays the interleavings of a cut (watchdog.go, invariant 2):
// the watchdog judged a request past the timeout in state judged, and by the time it acts the
// connection is still waiting, or the response has arrived, or the connection already serves
// the next request. Only the first is closed; in every case the connection is marked and a
// pool closes it instead of keeping it.
func TestCutNeverHitsTheNextForward(t *testing.T) {
	const judged = 7<<stateGenShift | stateBusy
	tests := []struct {
		name   string
		state  uint64 // the connection's state when the watchdog acts
		closed bool
	}{
		{name: "still waiting for the response", state: judged, closed: true},
		{name: "the response arrived", state: 7 << stateGenShift},
		{name: "the next request has started", state: 9<<stateGenShift | stateBusy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWatchdog(NewMonoClock(), func() time.Duration { return time.Second }, func(net.Conn) bool { return false })
			pc, peer := net.Pipe()
			t.Cleanup(func() { _ = pc.Close(); _ = peer.Close() })
			c := &WatchConn{Conn: pc, w: w, idx: -1}
			c.state.Store(tc.state)
			c.cutIf(judged)
			if got := isClosed(t, pc); got != tc.closed {
				t.Fatalf("closed = %v, want %v", got, tc.closed)
			}
			if c.reusable() {
				t.Fatal("a connection the watchdog cut is reusable")
			}
			pool := newConnPool("127.0.0.1:1", w, &shared{})
			pool.put(&BackendConn{wc: c, br: bufio.NewReader(c)})
			if n := len(pool.idle); n != 0 {
				t.Fatalf("the pool kept the cut connection (%d idle)", n)
			}
			if !isClosed(t, pc) {
				t.Fatal("put left the cut connection open")
			}
		})
	}
}

// TestClientCheckMarksBeforeReuse plays invariant 3 of watchdog.go: a client check that finds
// the client of a finished forward gone leaves the connection alone once the next forward's
// client is on it, and marks and closes it while the gone client is still on it.
func TestClientCheckMarksBeforeReuse(t *testing.T) {
	goneClient, _ := net.Pipe()
	hereClient, _ := net.Pipe()
	w := NewWatchdog(NewMonoClock(), func() time.Duration { return time.Second },
		func(c net.Conn) bool { return c == goneClient })

	// The forward ended and the next one took the connection before the check looked.
	pc, peer := net.Pipe()
	t.Cleanup(func() { _ = pc.Close(); _ = peer.Close() })
	c := &WatchConn{Conn: pc, w: w, idx: -1}
	c.setClient(goneClient)
	checks := []clientCheck{{backend: c, client: goneClient}} // what the check collected
	c.setClient(hereClient)
	for _, ch := range checks {
		w.checkOne(ch)
	}
	if !c.reusable() || isClosed(t, pc) {
		t.Fatal("the client check closed the connection of the next client's forward")
	}

	// The gone client is still on the connection: it is marked, closed, and never pooled.
	c.setClient(goneClient)
	w.checkOne(clientCheck{backend: c, client: goneClient})
	if c.reusable() || !c.isGone() || !isClosed(t, pc) {
		t.Fatal("a connection whose client went away was left open or reusable")
	}
}

// isClosed reports whether c was closed on this side (a read fails with io.ErrClosedPipe
// rather than timing out).
func isClosed(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now())
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.ErrClosedPipe)
}
