package upstream

import (
	"bufio"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// BackendConn is one connection to a backend with its buffers. It serves one forward at a time
// (the lease's holder) and goes back to its pool when a response has been read to its end on a
// connection the backend keeps alive. It is not safe for concurrent use (its WatchConn's Close
// is) and must not be copied.
type BackendConn struct {
	wc        *WatchConn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Duration // on the pool's clock, while idle

	// Reused by every streamed response on this connection (stream.go).
	body   ResponseBody
	chunks fasthttp.Response // decodes a chunked body: its Header only frames, its body streams
}

// Read reads what the backend sends, through the connection's buffer (an upgraded
// connection's bytes may already be in it).
func (c *BackendConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// Write writes to the backend.
func (c *BackendConn) Write(p []byte) (int, error) { return c.wc.Write(p) }

// Close closes the connection; it may be called more than once.
func (c *BackendConn) Close() { c.close() }

// close closes the connection; it may be called more than once.
func (c *BackendConn) close() {
	c.wc.setClient(nil)
	_ = c.wc.Close()
}

// shared is what the pools of one Pools share. shells keeps the buffers of backend
// connections that were closed after an answer without a body, for the connections dialled
// next: such a connection lives for one request, and its buffers are most of what a dial would
// allocate. bufs carries streamed bodies; yield, when set, is called before the first read of
// an answer (RoundTrip). It is safe for concurrent use and must not be copied.
type shared struct {
	shells sync.Pool
	bufs   *CopyBuffers
	yield  func()
}

// ConnPool holds the idle keep-alive connections to one backend and dials new ones. The number
// of connections in use is bounded by the backend's capacity through the leases, so the pool
// itself never makes a request wait. Idle connections are closed after idleConnDuration by a
// cleaner goroutine that runs only while some are idle. It is safe for concurrent use and must
// not be copied.
type ConnPool struct {
	addr   string
	watch  *Watchdog
	shared *shared // by every pool
	clock  MonoClock

	mu       sync.Mutex // guards the fields below
	idle     []*BackendConn
	cleaning bool
	closed   bool // no connection is kept any more (the backend left the configuration)
}

func newConnPool(addr string, w *Watchdog, s *shared) *ConnPool {
	return &ConnPool{addr: addr, watch: w, shared: s, clock: w.clock}
}

// Get returns an idle connection, the most recently used first, or dials a new one when none is
// idle or fresh is set. A dial error is a *DialError.
//
// Every idle connection is one whose last response was framed by its own length or chunks and
// read to its end: a connection whose answer had no body by definition (to HEAD, a 204, a 304)
// is never pooled (see retire), nor one with bytes past its response (see put).
func (p *ConnPool) Get(fresh bool) (*BackendConn, error) {
	if !fresh {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return c, nil
		}
		p.mu.Unlock()
	}
	wc, err := p.watch.dial(p.addr)
	if err != nil {
		return nil, err
	}
	if bc, ok := p.shared.shells.Get().(*BackendConn); ok {
		bc.wc = wc
		bc.br.Reset(wc)
		bc.bw.Reset(wc)
		return bc, nil
	}
	return &BackendConn{
		wc: wc,
		br: bufio.NewReaderSize(wc, ReadBufferSize),
		bw: bufio.NewWriterSize(wc, writeBufferSize),
	}, nil
}

// retire closes c after an answer that has no body by definition (to HEAD, a 204, a 304), and
// keeps its buffers for a later dial. Such an answer ends where its header ends, so nothing
// tells a body the backend sends anyway, or any bytes it sends later, from the answer to the
// next request on the connection: reused, the connection could hand one client's answer to
// another. So it is never reused, at the cost of a dial for the next request.
//
// The close is a reset (SO_LINGER 0), as HAProxy closes a server connection it is done with:
// the answer has been read whole and nothing is left to send, and a normal close would leave
// the socket in TIME_WAIT on pollbal's side for a minute, one per bodiless answer, using up
// the ephemeral ports to a busy backend. c must not be used afterwards.
func (p *ConnPool) retire(c *BackendConn) {
	c.wc.setClient(nil)
	if tc, ok := c.wc.Conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.wc.Close()
	c.wc = nil
	c.br.Reset(nil)
	c.bw.Reset(nil)
	p.shared.shells.Put(c)
}

// put makes c idle again, or closes it. It closes it when it holds unread bytes (a backend
// that sent more than its response), the watchdog marked it (its client went away, or a
// request on it was judged past the timeout), or the pool is closed.
func (p *ConnPool) put(c *BackendConn) {
	c.wc.setClient(nil)
	if c.br.Buffered() > 0 || !c.wc.reusable() {
		c.close()
		return
	}
	c.idleSince = p.clock.Now()
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
func (p *ConnPool) clean() {
	t := time.NewTicker(idleConnDuration / 4)
	defer t.Stop()
	var stale []*BackendConn
	for range t.C {
		now := p.clock.Now()
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
func (p *ConnPool) closeIdle(retire bool) {
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

// IdleCount is the number of idle connections (for tests).
func (p *ConnPool) IdleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
