package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// watchdogTick is how often the watchdog scans the backend connections. A forward that has
// been outstanding for proxy.backend_timeout is cut within two ticks after that (its start is
// known to one tick, and the scan that sees it expired comes at most one tick later); it is
// never cut earlier.
const watchdogTick = 25 * time.Millisecond

// watchdog enforces proxy.backend_timeout on backend connections without per-request
// deadlines: each connection marks, with one atomic store, when a request starts on it (its
// first Write after a response arrived) and when response data arrives (a Read that returns
// bytes), and the watchdog closes a connection whose request has been outstanding longer than
// the timeout. The round trip then fails on that connection, and the handler answers 504 because
// the attempt has lasted the timeout. Idle keep-alive connections are never touched.
//
// The watchdog goroutine runs only while backend connections exist: the first connection
// starts it, and it ends at the first scan that finds none (after Shutdown closed them, or
// fasthttp closed them as idle). It is safe for concurrent use.
type watchdog struct {
	limit func() time.Duration // the current proxy.backend_timeout; 0 disables it
	clock monoClock

	// gen is the scan generation: a request records the generation current when it starts,
	// so the watchdog knows it started before the scan that moved past that generation.
	gen atomic.Uint64
	// timeout is the limit the last scan applied; the handler reads it on the error path in
	// case a reload changed the timeout while a request was in flight.
	timeout atomic.Int64
	scans   atomic.Uint64 // scans done (tests wait on it)

	mu      sync.Mutex // guards the fields below and every watchConn's since, seen and idx
	conns   []*watchConn
	running bool
}

func newWatchdog(clock monoClock, limit func() time.Duration) *watchdog {
	return &watchdog{limit: limit, clock: clock}
}

// monoClock reads the monotonic clock alone, as time since its epoch: half the cost of
// time.Now, which also reads the wall clock (about 40 against 80 ns here), and the request
// path reads it twice. A monoClock may be copied.
type monoClock struct{ epoch time.Time }

func newMonoClock() monoClock { return monoClock{epoch: time.Now()} }

func (c monoClock) now() time.Duration { return time.Since(c.epoch) }

// dial connects to a backend: dialBackend bounded by the backend timeout, with the connection
// watched from the start of the dial, so that the timeout covers connecting as it did with a
// per-request deadline.
func (w *watchdog) dial(addr string) (*watchConn, error) {
	start := w.clock.now()
	c, err := dialBackend(addr, w.limit())
	if err != nil {
		return nil, err
	}
	return w.watch(c, start), nil
}

// watch wraps c, whose first request started at start (the dial), and starts the watchdog
// goroutine if it is not running.
func (w *watchdog) watch(c net.Conn, start time.Duration) *watchConn {
	wc := &watchConn{Conn: c, w: w}
	s := w.gen.Load()<<stateGenShift | stateFirst | stateBusy
	wc.state.Store(s)
	w.mu.Lock()
	wc.since, wc.seen = start, s
	w.conns = appendIndexed(w.conns, wc)
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
	return wc
}

// forget removes c from the watched set; it is idempotent.
func (w *watchdog) forget(c *watchConn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns = removeIndexed(w.conns, c)
}

func (w *watchdog) run() {
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	var (
		expired []*watchConn  // reused by every scan
		peeks   []clientCheck // reused by every client check
	)
	for n := 1; ; n++ {
		<-t.C
		var more bool
		if expired, more = w.scan(expired[:0]); !more {
			return
		}
		if n%clientCheckEvery == 0 {
			peeks = w.checkClients(peeks[:0])
		}
	}
}

// scan closes the connections whose request has outlasted the timeout, using expired as
// scratch space, which it returns. It reports false, and marks the watchdog stopped, when no
// connection is left to watch.
func (w *watchdog) scan(expired []*watchConn) ([]*watchConn, bool) {
	defer w.scans.Add(1)
	gen := w.gen.Add(1)  // requests that start from here on record gen
	now := w.clock.now() // later than the start of every request that recorded an older gen
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
			expired = append(expired, c)
		}
	}
	w.mu.Unlock()
	for i, c := range expired {
		_ = c.Close() // the request's Read or Write fails; fasthttp drops the connection
		expired[i] = nil
	}
	return expired, true
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

// watchConn is a backend connection watched by a watchdog. Read and Write are called by one
// goroutine at a time (the forward's); Close and setClient may be called by any.
type watchConn struct {
	net.Conn
	w     *watchdog
	state atomic.Uint64 // written only by the Read and Write caller; see stateBusy
	gone  atomic.Bool   // closed because the client of its forward went away

	cmu    sync.Mutex // guards client
	client net.Conn   // the client connection of the forward in progress, if any

	// Owned by the watchdog, under w.mu.
	since time.Duration
	seen  uint64
	idx   int // position in w.conns; -1 once forgotten
}

func (c *watchConn) position() *int { return &c.idx }

// Write marks the start of a request when the connection was not busy.
func (c *watchConn) Write(b []byte) (int, error) {
	if c.state.Load()&stateBusy == 0 {
		c.state.Store(c.w.gen.Load()<<stateGenShift | stateBusy)
	}
	return c.Conn.Write(b)
}

// Read is busy while it waits, and ends the wait when data arrives. The first wait of a
// request counts from the request's start (its first Write, or the dial); each later wait
// counts from its own start, so a streamed body may take any time as long as the backend never
// pauses for the backend timeout.
func (c *watchConn) Read(b []byte) (int, error) {
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
func (c *watchConn) Close() error {
	c.w.forget(c)
	return c.Conn.Close()
}

// awaitClient marks a request whose body is being streamed to the backend as waiting for the
// client, after each piece written: the backend timeout does not run while pollbal reads the
// client's next piece (a slow client is the client timeouts' business). The next Write starts
// it again, so a backend that stops reading the body is still cut, and so is one that is slow
// to answer once the body is sent.
func (c *watchConn) awaitClient() {
	c.state.Store(c.w.gen.Load() << stateGenShift)
}

// setClient records the client connection of the forward now using c (nil: none), for the
// watchdog's client checks.
func (c *watchConn) setClient(client net.Conn) {
	c.cmu.Lock()
	c.client = client
	c.cmu.Unlock()
}

// isGone reports whether the watchdog closed c because its client went away.
func (c *watchConn) isGone() bool { return c.gone.Load() }

// timedOut reports whether a forward that began at began (on the watchdog's clock) and failed
// has lasted the backend timeout: the request's own, or the one the watchdog applied if a
// reload lowered it.
func (w *watchdog) timedOut(began, timeout time.Duration) bool {
	elapsed := w.clock.now() - began
	if timeout > 0 && elapsed >= timeout {
		return true
	}
	applied := time.Duration(w.timeout.Load())
	return applied > 0 && elapsed >= applied
}
