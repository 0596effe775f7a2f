package upstream

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"pollbal/proxy/indexed"
)

// WatchdogTick is how often the watchdog scans the backend connections. A forward that has
// been outstanding for proxy.backend_timeout is cut within two ticks after that (its start is
// known to one tick, and the scan that sees it expired comes at most one tick later); it is
// never cut earlier.
const WatchdogTick = 25 * time.Millisecond

// Watchdog enforces proxy.backend_timeout on backend connections without per-request
// deadlines: each connection marks, with one atomic store, when a request starts on it (its
// first Write after a response arrived) and when response data arrives (a Read that returns
// bytes), and the watchdog closes a connection whose request has been outstanding longer than
// the timeout. The round trip then fails on that connection, and the handler answers 504 because
// the attempt has lasted the timeout. Idle keep-alive connections are never touched.
//
// The watchdog goroutine runs only while backend connections exist: the first connection
// starts it, and it ends at the first scan that finds none (after Shutdown closed them, or
// fasthttp closed them as idle). It is safe for concurrent use.
type Watchdog struct {
	limit func() time.Duration // the current proxy.backend_timeout; 0 disables it
	gone  func(client net.Conn) bool
	clock MonoClock

	// gen is the scan generation: a request records the generation current when it starts,
	// so the watchdog knows it started before the scan that moved past that generation.
	gen atomic.Uint64
	// timeout is the limit the last scan applied; the handler reads it on the error path in
	// case a reload changed the timeout while a request was in flight.
	timeout atomic.Int64
	scans   atomic.Uint64 // scans done (tests wait on it)

	mu      sync.Mutex // guards the fields below and every WatchConn's since, seen and idx
	conns   []*WatchConn
	running bool
}

// How the watchdog stays correct without locks on the request path: the invariants, each with
// a worked interleaving. W is the watchdog goroutine, F a forward using a connection.
//
//  1. Never early: a request is cut only after it has lasted the limit. Its start is not
//     recorded as a time (a clock read per request); instead it records the scan generation,
//     and a scan bumps the generation before it reads the clock, so a request that recorded an
//     older generation started before that reading:
//
//	F  Write: loads gen 7, stores state busy|7           (the request starts at t0)
//	W  scan: gen 7 -> 8, then now = t1                   (t1 > t0: F loaded 7 before the bump)
//	W  judge: busy|7 not seen before, 7 < 8: since = t1  (a start no earlier than the real one)
//	W  later scans: cut once now - t1 >= limit           (so now - t0 >= limit too)
//
//     Had F loaded the generation after the bump (8), its start might come after t1: the scan
//     leaves it, and the next scan (9) tracks it from its own clock reading. So since is never
//     before the request's start and the cut never early; and since is at most one tick after
//     the start, so the cut comes within two ticks after the limit. A connection's first
//     request is tracked from its dial, known exactly (watch).
//
//  2. A cut never hits the next forward on the connection. W judges under mu, but closes after
//     unlocking, and F may finish in between and hand the connection back to the pool:
//
//	W  judge: state busy|7, past the limit: expired (judged state busy|7)
//	F  Read: the response arrives, state busy|7 -> idle; F ends, put()
//	W  Close                                             <- would cut the next forward
//
//     So W first marks the connection cut, then closes it only if the state is still the one
//     judged (cutIf), and put never pools a marked connection (reusable):
//
//	W  cut = true; state still busy|7: Close             F's Read fails: 504, conn dropped
//	or
//	F  state -> idle;  W  cut = true; state moved: no Close;  F  put: cut, so closed, not pooled
//	or
//	F  state -> idle; put: not cut, pooled; F2 takes it, Write: state busy|9
//	W  cut = true; state busy|9 != busy|7: no Close      F2 goes on; its put closes the conn
//
//     Atomics are sequentially consistent: if W's load of the state saw the judged word, F's
//     store of a later one comes after W's mark, and so does F's put, which then sees the mark.
//     A later request's state always differs from the judged one (it records a generation at
//     least that of the judging scan), so the comparison cannot mistake it for the old one.
//
//  3. A client check never closes the connection of another client's forward. checkClients
//     collects (connection, client) pairs under mu, then peeks at each client without locks;
//     meanwhile the forward may end and the connection serve another client:
//
//	W  collect (bc, c1)
//	F1 ends: put(bc): setClient(nil), pooled;  F2 takes bc: setClient(c2)
//	W  c1 peeks gone; under cmu bc.client is c2 != c1: leave bc alone
//
//     The mark (gone) is stored under cmu together with the check, and put clears the client
//     under cmu before it reads the mark: either F1's put comes first (the check finds another
//     client or none) or the mark does (put closes bc instead of pooling it).
//
//  4. Every lease comes back exactly once: the watchdog never releases anything. It only
//     closes connections, and the forward's own Read or Write then fails on the path that
//     releases its lease (proxy's forward and upgraded connection, stream.go's Close).
//     proxy's TestWatchdogStress checks it under -race with clients leaving at random moments.

// NewWatchdog returns a watchdog on clock that applies the backend timeout limit returns. It
// closes the backend connection of a forward whose client connection gone reports gone; gone
// must not block (it peeks, as clientconn.Gone does).
func NewWatchdog(clock MonoClock, limit func() time.Duration, gone func(client net.Conn) bool) *Watchdog {
	return &Watchdog{limit: limit, gone: gone, clock: clock}
}

// MonoClock reads the monotonic clock alone, as time since its epoch: cheaper than time.Now,
// which also reads the wall clock (bench/TUNING.md), and the request path reads it twice. A
// MonoClock may be copied.
type MonoClock struct{ epoch time.Time }

func NewMonoClock() MonoClock { return MonoClock{epoch: time.Now()} }

func (c MonoClock) Now() time.Duration { return time.Since(c.epoch) }

// dial connects to a backend: dialBackend bounded by the backend timeout, with the connection
// watched from the start of the dial, so that the timeout covers connecting too.
func (w *Watchdog) dial(addr string) (*WatchConn, error) {
	start := w.clock.Now()
	c, err := dialBackend(addr, w.limit())
	if err != nil {
		return nil, err
	}
	return w.watch(c, start), nil
}

// watch wraps c, whose first request started at start (the dial), and starts the watchdog
// goroutine if it is not running.
func (w *Watchdog) watch(c net.Conn, start time.Duration) *WatchConn {
	wc := &WatchConn{Conn: c, w: w}
	s := w.gen.Load()<<stateGenShift | stateFirst | stateBusy
	wc.state.Store(s)
	w.mu.Lock()
	wc.since, wc.seen = start, s
	w.conns = indexed.Append(w.conns, wc)
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
	return wc
}

// forget removes c from the watched set; it is idempotent.
func (w *Watchdog) forget(c *WatchConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns = indexed.Remove(w.conns, c)
}

func (w *Watchdog) run() {
	t := time.NewTicker(WatchdogTick)
	defer t.Stop()
	var (
		expired []expiry      // reused by every scan
		peeks   []clientCheck // reused by every client check
	)
	for n := 1; ; n++ {
		<-t.C
		var more bool
		if expired, more = w.scan(expired[:0]); !more {
			return
		}
		if n%ClientCheckEvery == 0 {
			peeks = w.checkClients(peeks[:0])
		}
	}
}

// expiry is a connection whose request a scan found past the timeout, with the state word the
// scan judged.
type expiry struct {
	c     *WatchConn
	state uint64
}

// scan closes the connections whose request has outlasted the timeout, using expired as
// scratch space, which it returns. It reports false, and marks the watchdog stopped, when no
// connection is left to watch.
func (w *Watchdog) scan(expired []expiry) ([]expiry, bool) {
	defer w.scans.Add(1)
	gen := w.gen.Add(1)  // requests that start from here on record gen
	now := w.clock.Now() // later than the start of every request that recorded an older gen
	limit := w.limit()
	w.timeout.Store(int64(limit))
	w.mu.Lock()
	if len(w.conns) == 0 {
		w.running = false
		w.mu.Unlock()
		return expired, false
	}
	for _, c := range w.conns {
		var cut bool
		c.since, c.seen, cut = judge(c.state.Load(), c.seen, c.since, gen, now, limit)
		if cut {
			expired = append(expired, expiry{c: c, state: c.seen})
		}
	}
	w.mu.Unlock()
	for i, x := range expired {
		x.c.cutIf(x.state)
		expired[i] = expiry{}
	}
	return expired, true
}

// cutIf ends the request the watchdog judged expired in state judged: it closes the
// connection, so the request's Read or Write fails, unless the connection's state has moved on
// meanwhile (the response arrived). Either way the connection is marked cut first and is never
// reused: a forward that ends after the mark closes it rather than pooling it, so the close
// can never hit the next forward on the connection (see the worked interleaving above).
func (c *WatchConn) cutIf(judged uint64) {
	c.cut.Store(true)
	if c.state.Load() == judged {
		_ = c.Close()
	}
}

// Connection state word: the generation at the request's start, a flag for the first request
// of a connection (whose start is the dial, known exactly), and busy from the request's start
// until response data arrives (set again while a later Read of the same response waits).
const (
	stateBusy     = 1 << 0
	stateFirst    = 1 << 1
	stateGenShift = 2
)

// judge is the watchdog's decision for one connection at one scan. state is the connection's
// state word now; seen is the busy state it last tracked and since the latest time the request
// of seen can have started; gen is the generation this scan started and now the time after it
// did. It returns the new since and seen, and whether to close the connection.
//
// A busy state not seen before is a new request: if it recorded a generation older than gen,
// it started before now, so now bounds its start; if it recorded gen, it started during this
// scan and is tracked from the next one. The request is cut once now - since reaches the
// limit, so it has lasted at least the limit whatever the scan delays.
func judge(state, seen uint64, since time.Duration, gen uint64, now, limit time.Duration) (time.Duration, uint64, bool) {
	if state&stateBusy == 0 {
		return since, seen, false // idle, or between two reads of one response
	}
	if state != seen {
		if state>>stateGenShift >= gen {
			return since, seen, false
		}
		since, seen = now, state
	}
	return since, seen, limit > 0 && now-since >= limit
}

// WatchConn is a backend connection watched by a watchdog. Read and Write are called by one
// goroutine at a time (the forward's); Close and setClient may be called by any.
type WatchConn struct {
	net.Conn
	w     *Watchdog
	state atomic.Uint64 // written only by the Read and Write caller; see stateBusy
	gone  atomic.Bool   // closed because the client of its forward went away
	cut   atomic.Bool   // a request on it was judged past the timeout: never reused

	cmu    sync.Mutex // guards client
	client net.Conn   // the client connection of the forward in progress, if any

	// Owned by the watchdog, under w.mu.
	since time.Duration
	seen  uint64
	idx   int // position in w.conns; -1 once forgotten
}

// Position is where the watchdog keeps c (indexed.Item).
func (c *WatchConn) Position() *int { return &c.idx }

// Write marks the start of a request when the connection was not busy.
func (c *WatchConn) Write(b []byte) (int, error) {
	if c.state.Load()&stateBusy == 0 {
		c.state.Store(c.w.gen.Load()<<stateGenShift | stateBusy)
	}
	return c.Conn.Write(b)
}

// Read is busy while it waits, and ends the wait when data arrives. The first wait of a
// request counts from the request's start (its first Write, or the dial); each later wait
// counts from its own start, so a streamed body may take any time as long as the backend never
// pauses for the backend timeout.
func (c *WatchConn) Read(b []byte) (int, error) {
	s := c.state.Load()
	if s&stateBusy == 0 {
		s = c.w.gen.Load()<<stateGenShift | stateBusy
		c.state.Store(s)
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.state.Store(s &^ stateBusy)
	}
	return n, err
}

// Close stops watching the connection and closes it.
func (c *WatchConn) Close() error {
	c.w.forget(c)
	return c.Conn.Close()
}

// AwaitClient marks a request whose body is being streamed to the backend as waiting for the
// client, after each piece written: the backend timeout does not run while pollbal reads the
// client's next piece (a slow client is the client timeouts' business). The next Write starts
// it again, so a backend that stops reading the body is still cut, and so is one that is slow
// to answer once the body is sent.
func (c *WatchConn) AwaitClient() {
	c.state.Store(c.w.gen.Load() << stateGenShift)
}

// setClient records the client connection of the forward now using c (nil: none), for the
// watchdog's client checks.
func (c *WatchConn) setClient(client net.Conn) {
	c.cmu.Lock()
	c.client = client
	c.cmu.Unlock()
}

// isGone reports whether the watchdog closed c because its client went away.
func (c *WatchConn) isGone() bool { return c.gone.Load() }

// reusable reports whether c may serve another forward: neither its client went away nor a
// request on it was judged past the timeout.
func (c *WatchConn) reusable() bool { return !c.gone.Load() && !c.cut.Load() }

// Scans reports how many scans the watchdog has done (for tests).
func (w *Watchdog) Scans() uint64 { return w.scans.Load() }

// Watched reports how many connections are watched, and how many of them wait for their
// backend (for tests).
func (w *Watchdog) Watched() (n, busy int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.conns {
		if c.state.Load()&stateBusy != 0 {
			busy++
		}
	}
	return len(w.conns), busy
}

// TimedOut reports whether a forward that began at began (on the watchdog's clock) and failed
// has lasted the backend timeout: the request's own, or the one the watchdog applied if a
// reload lowered it.
func (w *Watchdog) TimedOut(began, timeout time.Duration) bool {
	elapsed := w.clock.Now() - began
	if timeout > 0 && elapsed >= timeout {
		return true
	}
	applied := time.Duration(w.timeout.Load())
	return applied > 0 && elapsed >= applied
}
