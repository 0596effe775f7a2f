package clientconn

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Phases of a client connection, in the low bits of Conn.phase; the bits above count the
// changes, so that the scanner tells a new phase from the same one seen before.
const (
	phaseHeader   = iota // opened, or the next request's first byte arrived: its headers are being read
	phaseBusy            // headers complete: the body, the forward and the response
	phaseIdle            // a keep-alive connection waiting for its next request
	phaseHijacked        // handed over by the handler: no longer timed here
	phaseBits     = 2
	phaseMask     = 1<<phaseBits - 1
	phaseStep     = 1 << phaseBits
)

// I/O flags in the low bits of Conn.io: a Read or a Write is under way. The bits above
// count the Reads and Writes started and finished, so any progress changes the word.
const (
	ioReading = 1 << 0
	ioWriting = 1 << 1
	ioBits    = 2
	ioStep    = 1 << ioBits
)

// writeChunk bounds one Write on the socket, so that a large response to a slow reader shows
// progress to the scanner every writeChunk bytes: client_timeout is a gap between bytes, not a
// limit on a whole response.
const writeChunk = 64 << 10

// headersEndMark ends an HTTP/1.1 request's header block. fasthttp waits for it (a block ended
// by bare LFs stays unfinished), so the header phase ends when it arrives.
const headersEndMark = "\r\n\r\n"

// Conn is an accepted client connection, tracked for the connection limit, the client
// timeouts and shutdown. Its state lives in two atomic words that the serving goroutine updates
// without locks or clock reads; one scanner per listener reads them (see scan.go).
//
// Read, Write and the phase changes are made by the connection's serving goroutine; Close may be
// called by any goroutine and is idempotent. It must not be copied.
type Conn struct {
	net.Conn
	l      *Listener
	client IP // set before the connection is served; read-only (Client)

	phase atomic.Uint64 // phase | changes<<phaseBits
	io    atomic.Uint64 // ioReading|ioWriting | operations<<ioBits
	// matched is how many bytes of headersEndMark ended what was read so far of the request's
	// headers; serving goroutine only.
	matched int
	closed  atomic.Bool
	// handoff is what waits for fasthttp to hand this connection over once the handler
	// returns (an upgraded session, a relay to an HTTP/1.0 client): if the connection is
	// closed first, Close abandons it (which releases its lease).
	hmu     sync.Mutex
	handoff Handoff

	// secure is the TLS connection on top of this one (TLS listener), nil for plain HTTP; it is
	// set before the connection joins the scanned set and never changes. Its request bytes are seen decrypted (TLSConn.Read),
	// not here. handshook turns true once the handshake is over; rawRead once a byte of it
	// arrived (the serving goroutine's own).
	secure    *tls.Conn
	handshook atomic.Bool
	rawRead   bool
	// tlsVersion and sni are the TLS version and server name the handshake agreed on, for the
	// access log; written by the serving goroutine before handshook turns true, read-only after.
	tlsVersion uint16
	sni        string
	timedOut   atomic.Bool // closed by the scanner for proxy.client_timeout

	// Owned by the scanner, under l.mu.
	rec record
	idx int // position in l.conns; -1 once forgotten
	// answering: a scan cut c for its late headers, and the goroutine it started writes the
	// 408 and then closes c; later scans leave c to it, so the answer is written and counted once.
	answering bool
}

// Position is where the scanner keeps c (indexed.Item).
func (c *Conn) Position() *int { return &c.idx }

// Read reads from the client. It marks the start of a request (the first byte after an idle
// wait) and the end of its headers. The first read after a response yields first when the
// proxy is busy (Hooks.Yield): the client has yet to receive the response and send its next
// request.
func (c *Conn) Read(b []byte) (int, error) {
	if c.phase.Load()&phaseMask == phaseIdle {
		c.l.hooks.Yield()
	}
	c.io.Add(ioStep | ioReading)
	n, err := c.Conn.Read(b)
	c.io.Add(ioStep - ioReading)
	if n > 0 {
		if c.secure == nil {
			c.sawBytes(b[:n])
		} else {
			c.rawRead = true
		}
	}
	return n, err
}

// sawBytes moves the phase on for bytes read: an idle connection starts a request, and the
// request's headers end at headersEndMark.
func (c *Conn) sawBytes(p []byte) {
	ph := c.phase.Load()
	switch ph & phaseMask {
	case phaseIdle:
		ph = c.setPhase(ph, phaseHeader)
	case phaseHeader:
	default:
		return
	}
	var done bool
	if c.matched, done = headersEnd(c.matched, p); done {
		c.setPhase(ph, phaseBusy)
	}
}

// Write writes to the client in chunks of at most writeChunk bytes.
func (c *Conn) Write(b []byte) (int, error) {
	var n int
	for len(b) > 0 {
		chunk := b
		if len(chunk) > writeChunk {
			chunk = chunk[:writeChunk]
		}
		c.io.Add(ioStep | ioWriting)
		m, err := c.Conn.Write(chunk)
		c.io.Add(ioStep - ioWriting)
		n += m
		if err != nil {
			return n, err
		}
		b = b[m:]
	}
	return n, nil
}

// Close stops tracking the connection and closes it; later calls do nothing.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.l.forget(c)
	err := c.Conn.Close()
	c.hmu.Lock()
	h := c.handoff
	c.handoff = nil
	c.hmu.Unlock()
	if h != nil {
		h.Abandon()
	}
	return err
}

// Handoff is what takes a connection over once the handler returns (ctx.Hijack). If the
// connection is closed before that, Close calls Abandon, once.
type Handoff interface{ Abandon() }

// SetHandoff makes h the connection's hand-over (nil: none).
func (c *Conn) SetHandoff(h Handoff) {
	c.hmu.Lock()
	c.handoff = h
	c.hmu.Unlock()
}

// ClearHandoff removes h, if it is still the connection's hand-over: it has taken the
// connection over, and Close must no longer abandon it.
func (c *Conn) ClearHandoff(h Handoff) {
	c.hmu.Lock()
	if c.handoff == h {
		c.handoff = nil
	}
	c.hmu.Unlock()
}

// Client is who the client is, worked out when the connection was accepted.
func (c *Conn) Client() IP { return c.client }

// TLS reports the TLS version and server name the handshake agreed on; ok is false for a
// plain connection, and for nil. Valid once a request has been read.
func (c *Conn) TLS() (version uint16, sni string, ok bool) {
	if c == nil || c.secure == nil {
		return 0, "", false
	}
	return c.tlsVersion, c.sni, true
}

// TimedOut reports whether the scanner closed c for proxy.client_timeout: a request
// whose client it cut off ended with client_timeout, not client_gone. It is false for nil (a
// connection pollbal's listeners did not accept).
func TimedOut(c *Conn) bool { return c != nil && c.timedOut.Load() }

// NetConn returns the accepted connection itself, for code that needs more than net.Conn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// ErrNoRawConn is SyscallConn's answer for a connection without a file descriptor (an
// in-memory one in tests).
var ErrNoRawConn = errors.New("client connection has no file descriptor")

// SyscallConn gives access to the socket of the accepted connection (e.g. to see whether the
// client went away without reading from it).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, ErrNoRawConn
}

// setPhase moves the connection from the phase word ph to phase and returns the new word.
func (c *Conn) setPhase(ph, phase uint64) uint64 {
	next := (ph&^phaseMask + phaseStep) | phase
	c.phase.Store(next)
	if phase != phaseHeader {
		c.matched = 0
	}
	return next
}

// RequestStarted is fasthttp's StateActive: the next request's first byte is there (it may have
// been read with the previous request).
func (c *Conn) RequestStarted() {
	if ph := c.phase.Load(); ph&phaseMask == phaseIdle {
		c.setPhase(ph, phaseHeader)
	}
}

// RequestServed is fasthttp's StateIdle: the response was written, the next request may come.
func (c *Conn) RequestServed() {
	c.setPhase(c.phase.Load(), phaseIdle)
}

// Hijacked is fasthttp's StateHijacked: the handler took the connection over.
func (c *Conn) Hijacked() {
	c.setPhase(c.phase.Load(), phaseHijacked)
}

// Handling marks the request as read whole: the handler runs. It covers what the byte scan
// cannot see (a request that was read along with the previous one).
func (c *Conn) Handling() {
	if ph := c.phase.Load(); ph&phaseMask != phaseBusy {
		c.setPhase(ph, phaseBusy)
	}
}

// headersEnd looks for the end of a header block in p, which follows bytes whose last matched
// bytes matched headersEndMark's first ones. It returns how many bytes of the mark end p (when
// not found) and whether the block ended.
func headersEnd(matched int, p []byte) (int, bool) {
	if matched > 0 {
		rest := headersEndMark[matched:]
		k := 0
		for k < len(rest) && k < len(p) && p[k] == rest[k] {
			k++
		}
		if k == len(rest) {
			return 0, true
		}
		if k == len(p) {
			return matched + k, false
		}
	}
	if bytes.Contains(p, []byte(headersEndMark)) {
		return 0, true
	}
	for m := min(len(headersEndMark)-1, len(p)); m > 0; m-- {
		if string(p[len(p)-m:]) == headersEndMark[:m] {
			return m, false
		}
	}
	return 0, false
}

// record is what the scanner remembers of a connection between two scans: the words it saw
// and the latest time the state they show can have begun.
type record struct {
	phase, io uint64
	since     time.Duration
}
