package proxy

import (
	"bufio"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// backendConn is one connection to a backend with its buffers. It serves one forward at a time
// (the lease's holder) and goes back to its pool when a response has been read to its end on a
// connection the backend keeps alive. It is not safe for concurrent use (its watchConn's Close
// is) and must not be copied.
type backendConn struct {
	wc        *watchConn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Duration // on the pool's clock, while idle
	// bodiless: the last response on the connection had no body by definition (an answer to
	// HEAD, a 204, a 304), so get peeks at it before reuse.
	bodiless bool
	peek     socketPeek

	// Reused by every streamed response on this connection (stream.go).
	body   responseBody
	chunks fasthttp.Response // decodes a chunked body: its Header only frames, its body streams
}

// close closes the connection; it may be called more than once.
func (c *backendConn) close() {
	c.wc.setClient(nil)
	_ = c.wc.Close()
}

// connPool holds the idle keep-alive connections to one backend and dials new ones. The number
// of connections in use is bounded by the backend's capacity through the leases, so the pool
// itself never makes a request wait. Idle connections are closed after idleConnDuration by a
// cleaner goroutine that runs only while some are idle. It is safe for concurrent use and must
// not be copied.
type connPool struct {
	addr  string
	watch *watchdog
	clock monoClock

	mu       sync.Mutex // guards the fields below
	idle     []*backendConn
	cleaning bool
	closed   bool // no connection is kept any more (the backend left the configuration)
}

func newConnPool(addr string, w *watchdog) *connPool {
	return &connPool{addr: addr, watch: w, clock: w.clock}
}

// get returns an idle connection, the most recently used first, or dials a new one when none is
// idle or fresh is set. A dial error is a *dialError.
//
// An idle connection whose last response had no body by definition (an answer to HEAD, a 204,
// a 304) is peeked at first (one system call), and closed rather than used when it has
// something to read: a backend that sends a body anyway, or any bytes after such a response,
// is out of step, and the next request on the connection would read them as its response (a
// 502, or a forged answer). put catches bytes that came with the response; the peek catches
// those that arrived after it. Other responses are framed by their own length or chunks, so
// their connections are not peeked (the request path stays free of the system call); bytes
// past such a response are caught only when they came with it.
func (p *connPool) get(fresh bool) (*backendConn, error) {
	for !fresh {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		peek := c.bodiless
		c.bodiless = false
		if !peek || !c.peek.readable() {
			return c, nil
		}
		c.close()
	}
	wc, err := p.watch.dial(p.addr)
	if err != nil {
		return nil, err
	}
	bc := &backendConn{
		wc: wc,
		br: bufio.NewReaderSize(wc, readBufferSize),
		bw: bufio.NewWriterSize(wc, writeBufferSize),
	}
	bc.peek.init(wc.Conn)
	return bc, nil
}

// put makes c idle again, or closes it when it holds unread bytes (a backend that sent more
// than its response), the watchdog marked it (its client went away, or a request on it was
// judged past the timeout), or the pool is closed.
func (p *connPool) put(c *backendConn) {
	c.wc.setClient(nil)
	if c.br.Buffered() > 0 || !c.wc.reusable() {
		c.close()
		return
	}
	c.idleSince = p.clock.now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	if !p.cleaning {
		p.cleaning = true
		go p.clean()
	}
	p.mu.Unlock()
}

// clean closes connections idle for idleConnDuration, checking four times in that span, and
// ends when none is idle.
func (p *connPool) clean() {
	t := time.NewTicker(idleConnDuration / 4)
	defer t.Stop()
	var stale []*backendConn
	for range t.C {
		now := p.clock.now()
		p.mu.Lock()
		kept := p.idle[:0]
		for _, c := range p.idle {
			if now-c.idleSince >= idleConnDuration {
				stale = append(stale, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(p.idle[len(kept):])
		p.idle = kept
		done := len(p.idle) == 0
		if done {
			p.cleaning = false
		}
		p.mu.Unlock()
		for i, c := range stale {
			c.close()
			stale[i] = nil
		}
		stale = stale[:0]
		if done {
			return
		}
	}
}

// closeIdle closes every idle connection; with retire set, connections handed back later are
// closed too.
func (p *connPool) closeIdle(retire bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if retire {
		p.closed = true
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// idleCount is the number of idle connections (for tests).
func (p *connPool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
