package clientconn

import (
	"time"
)

// Limits are the client-side timeouts of proxy: (header_timeout, client_timeout,
// idle_timeout); zero disables one.
type Limits struct {
	Header, Client, Idle time.Duration
}

// verdict is the scanner's decision for one connection.
type verdict int

const (
	keepConn      verdict = iota
	cutHeader             // headers late: answer 408 request_timeout, then close
	cutHeaderMute         // headers late while a pipelined answer is being written: close
	cutClient             // no byte moved for client_timeout during a request: close
	cutIdle               // keep-alive connection idle for idle_timeout: close
	closeQuiet            // shutting down and no request in flight: close
	keepDraining          // shutting down, no request in flight yet, within drainGrace: keep for now
)

// drainGrace is how long, while shutting down, a connection that has sent nothing since it
// opened or since its last answer is kept before it is closed. A keep-alive client at full
// speed sends its next request as soon as it reads an answer; that request may be on its way
// (or in the socket's buffer, unread) at the moment the connection looks idle, and closing it
// then loses the request: the client sees a reset or an early close, not an answer. Kept a
// little longer, the request arrives, is answered with "Connection: close", and the client
// reconnects (to the new process after an upgrade, or to the socket's backlog under systemd).
// A connection quiet for longer is a client that is done. It is far below the 1 s in which a
// shutdown with nothing in flight must end.
const drainGrace = 300 * time.Millisecond

// drainTick is how often each scanner looks at its connections while shutting down: a quiet
// connection is closed at most this long after its grace.
const DrainTick = 25 * time.Millisecond

// Scan ticks: a tenth of the shortest timeout, within these bounds. A connection is cut at
// least its timeout after the state began, and at most one tick later.
const (
	minScanTick = 10 * time.Millisecond
	maxScanTick = 250 * time.Millisecond
)

func scanTick(lim Limits) time.Duration {
	tick := maxScanTick
	for _, d := range []time.Duration{lim.Header, lim.Client, lim.Idle} {
		if d > 0 && d/10 < tick {
			tick = d / 10
		}
	}
	return max(tick, minScanTick)
}

// judgeClient is the scanner's decision for one connection at one scan: rec is what it knew,
// phase and io the connection's words now, now the scan's time. It returns the updated record
// and the verdict.
//
// A state is timed from the first scan that saw it (so never from before it began): a new
// phase restarts the clock; during a request, so does any Read or Write starting or ending.
// The header phase is timed as a whole (bytes trickling in do not extend it), and a request
// waiting on its backend (no Read or Write under way) is backend_timeout's business, not the
// client's.
//
// While stopping, a connection with a request in flight is kept (its answer closes it); one
// holding part of a request (a half-sent header block, a TLS handshake under way) is closed at
// once; one that has sent nothing since it opened or since its last answer is closed once it
// has been so for drainGrace (see there), and kept until then.
func judgeClient(rec record, phase, io uint64, now time.Duration, lim Limits, stopping bool) (record, verdict) {
	kind := phase & phaseMask
	if phase != rec.phase || (kind == phaseBusy && io != rec.io) {
		rec.since = now
	}
	rec.phase, rec.io = phase, io
	elapsed := now - rec.since
	switch kind {
	case phaseHeader:
		switch {
		case stopping && requestBegun(phase, io):
			return rec, closeQuiet
		case stopping && elapsed >= drainGrace:
			return rec, closeQuiet
		case stopping:
			return rec, keepDraining
		case lim.Header > 0 && elapsed >= lim.Header && io&ioWriting != 0:
			return rec, cutHeaderMute
		case lim.Header > 0 && elapsed >= lim.Header:
			return rec, cutHeader
		}
	case phaseIdle:
		switch {
		case stopping && elapsed >= drainGrace:
			return rec, closeQuiet
		case stopping:
			return rec, keepDraining
		case lim.Idle > 0 && elapsed >= lim.Idle:
			return rec, cutIdle
		}
	case phaseBusy:
		if lim.Client > 0 && elapsed >= lim.Client && io&(ioReading|ioWriting) != 0 {
			return rec, cutClient
		}
	}
	return rec, keepConn
}

// requestBegun says, for a connection in the header phase with the phase and I/O words phase
// and io, whether bytes of a request have arrived: the phase moved on before (it only comes
// back to the header phase when a request's first bytes arrive), or, on a new connection, a
// Read has ended (a Read that ends with nothing read is an error that closes the connection).
// On a TLS connection those bytes may be the handshake's.
func requestBegun(phase, io uint64) bool {
	return phase>>phaseBits != 0 || io>>ioBits >= 2
}

// ScanLoop runs the listener's scanner until the listener is closed and its last connection
// is gone. While the proxy shuts down it scans every drainTick.
func (l *Listener) ScanLoop() {
	defer l.scanEnded.Store(true)
	t := time.NewTimer(scanTick(l.limits()))
	defer t.Stop()
	var cut []cutConn // reused by every scan
	for {
		select {
		case <-t.C:
		case <-l.kick:
		}
		var more bool
		if cut, more = l.scan(cut[:0]); !more {
			return
		}
		if l.hooks.Stopping() {
			t.Reset(DrainTick)
		} else {
			t.Reset(scanTick(l.limits()))
		}
	}
}

// cutConn is a connection the scan decided to close, and why; since is when the state it was
// cut in began (on the proxy's clock).
type cutConn struct {
	c     *Conn
	v     verdict
	since time.Duration
}

// scan judges every connection and acts on the verdicts, using cut as scratch space, which it
// returns. It reports false when the listener is closed and no connection is left.
func (l *Listener) scan(cut []cutConn) ([]cutConn, bool) {
	defer l.scans.Add(1)
	lim := l.limits()
	stopping := l.hooks.Stopping()
	now := l.hooks.Now()
	served := 0 // connections fasthttp still serves: all but the hijacked ones
	l.mu.Lock()
	for _, c := range l.conns {
		var v verdict
		phase := c.phase.Load()
		if phase&phaseMask != phaseHijacked {
			served++
		}
		if c.rec, v = judgeClient(c.rec, phase, c.io.Load(), now, lim, stopping); v != keepConn && v != keepDraining && !c.answering {
			c.answering = v == cutHeader
			cut = append(cut, cutConn{c, v, c.rec.since})
		}
	}
	more := len(l.conns) > 0 || !l.closed.IsSet()
	l.mu.Unlock()
	// The ones cut below are closed before this scan counts as done.
	l.served.Store(int64(served - len(cut)))
	for i, k := range cut {
		l.cut(k.c, k.v, k.since)
		cut[i] = cutConn{}
	}
	return cut, more
}

// headerTimeoutWrite bounds writing the 408 to a client that does not read.
const headerTimeoutWrite = time.Second

// cut closes c for verdict v, counting the timeout; since is when the state it is cut in
// began.
func (l *Listener) cut(c *Conn, v verdict, since time.Duration) {
	m := l.hooks.Metrics
	switch v {
	case cutHeader:
		m.HeaderTimeouts.Inc()
		// In its own goroutine: the scanner never waits on a client.
		go func() {
			// Headers that completed since the scan are a request now: no 408 across its answer.
			if c.phase.Load()&phaseMask == phaseHeader {
				l.timedOutHeader(c, since)
			}
			_ = c.Close()
		}()
		return
	case cutHeaderMute:
		m.HeaderTimeouts.Inc()
	case cutClient:
		m.ClientTimeouts.Inc()
		c.timedOut.Store(true) // before the close that ends the request's transfer
	case cutIdle:
		m.IdleTimeouts.Inc()
	}
	_ = c.Close()
}

// timedOutHeader answers a connection whose request headers came too late (they began at
// since) through the server's HeaderTimedOut. Over TLS, a handshake still going cannot be
// answered and is counted as a failed handshake instead.
func (l *Listener) timedOutHeader(c *Conn, since time.Duration) {
	if c.secure != nil && !c.handshook.Load() {
		l.hooks.Metrics.TLSHandshakeErrors.Inc()
		return
	}
	l.hooks.HeaderTimedOut(c, since)
}
