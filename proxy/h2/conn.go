package h2

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// readBuffer is the size of a connection's read buffer. The HTTP/2 server reads each frame's
// header and then its payload with a read of its own; through the buffer, the frames a client
// sent together cost one read of the connection (one system call on h2c), not two per frame.
const readBuffer = 4 << 10

// errCutOff ends the reads of a connection the frame watch cut off.
var errCutOff = errors.New("http/2 client cut off")

// Reasons a connection is cut off, the reason label of pollbal_http2_resets_total.
const (
	reasonRapidReset   = "rapid_reset"
	reasonContinuation = "continuation"
	reasonMalformed    = "malformed" // a header block with a connection-specific field
)

// clientConn is an HTTP/2 client connection as the HTTP/2 server reads it: every byte read
// goes through the frame watch first, and a connection that resets streams faster than it
// lets them complete, or floods a header block, is closed before the server sees the frame
// that crossed the line: the watch sees the bytes as they come into the read buffer, before
// the server reads them from it. Read belongs to the server's reading goroutine; completed
// is called by the streams' handlers; Close by anyone, once or more.
type clientConn struct {
	net.Conn
	in     *bufio.Reader        // reads through watchedReader
	proto  string               // "h2" or "h2c", the proto label
	tls    *tls.ConnectionState // nil: cleartext; read-only
	s      *Server
	watch  frameWatch
	debt   atomic.Int64 // reset debt (reset.go)
	cut    atomic.Bool
	closer sync.Once
	closed error
}

func newClientConn(nc net.Conn, proto string, s *Server, watch frameWatch) *clientConn {
	c := &clientConn{Conn: nc, proto: proto, s: s, watch: watch}
	c.in = bufio.NewReaderSize(watchedReader{c}, readBuffer)
	return c
}

// Read reads what the client sent, through the read buffer.
func (c *clientConn) Read(p []byte) (int, error) {
	if c.cut.Load() {
		return 0, errCutOff
	}
	return c.in.Read(p)
}

// watchedReader reads from the client and watches the frames read.
type watchedReader struct{ c *clientConn }

func (r watchedReader) Read(p []byte) (int, error) { return r.c.readWatched(p) }

func (c *clientConn) readWatched(p []byte) (int, error) {
	if c.cut.Load() {
		return 0, errCutOff
	}
	n, err := c.Conn.Read(p)
	resets, cut := c.watch.feed(p[:n])
	if cut != "" {
		c.cutOff(cut)
		return 0, errCutOff
	}
	for range resets {
		if c.reset() {
			c.cutOff(reasonRapidReset)
			return 0, errCutOff
		}
	}
	return n, err
}

// reset takes one stream reset by the client into the debt; it reports whether the
// connection must be cut off.
func (c *clientConn) reset() bool {
	for {
		debt := c.debt.Load()
		next, cut := afterReset(debt)
		if c.debt.CompareAndSwap(debt, next) {
			return cut
		}
	}
}

// completed takes a stream that was answered whole into the debt.
func (c *clientConn) completed() {
	for {
		debt := c.debt.Load()
		if c.debt.CompareAndSwap(debt, afterCompleted(debt)) {
			return
		}
	}
}

// cutOff counts the connection as cut off for reason and closes it: every stream's context
// ends, so their forwards end and release their leases (the proxy's watchdog sees the stream
// gone).
func (c *clientConn) cutOff(reason string) {
	if !c.cut.CompareAndSwap(false, true) {
		return
	}
	c.s.metrics.cut(c.proto, reason).Inc()
	c.s.log.Warn("http/2 client cut off", "reason", reason, "client", c.RemoteAddr().String())
	_ = c.Close()
}

// Close closes the connection once.
func (c *clientConn) Close() error {
	c.closer.Do(func() { c.closed = c.Conn.Close() })
	return c.closed
}
