package proxy

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"pollbal/proxy/clientconn"
	"pollbal/proxy/upstream"

	"github.com/valyala/fasthttp"
)

// relayUntilClose sends a streamed response of unknown length to an HTTP/1.0 client, which
// cannot read the chunked coding fasthttp would use: without a length, ended by closing the
// connection. The stream leaves ctx.Response (without being closed) for a hijack handler that
// writes the header and then the body straight to the client connection, and closes the
// stream, ending the forward, when done. The hijacked connection is no longer the scanner's,
// so the relay enforces clientTimeout (proxy.client_timeout; 0: none) itself: a client that
// accepts no byte for that long ends it, as it would any other response, which e, the
// request's entry that the stream owns, records.
func (p *Proxy) relayUntilClose(ctx *fasthttp.RequestCtx, e *logEntry, clientTimeout time.Duration) {
	b, ok := ctx.Response.BodyStream().(*upstream.ResponseBody)
	if !ok {
		return
	}
	b.DetachFrom(&ctx.Response)
	h := &ctx.Response.Header
	h.Del(fasthttp.HeaderTransferEncoding)
	h.SetContentLength(-2) // no length: the body ends when the connection does
	h.SetConnectionClose()
	head := append([]byte(nil), h.Header()...)
	r := &relay{b: b}
	cc := clientconn.Tracked(ctx.Conn())
	if cc != nil {
		// fasthttp skips the hijack handler when it fails to flush what it held back for an
		// earlier pipelined request, and then closes the connection: the close ends the relay.
		cc.SetHandoff(r)
	}
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if cc != nil {
			cc.ClearHandoff(r)
		}
		if !r.claim() {
			return
		}
		defer func() { _ = b.Close() }()
		w := &deadlineWriter{c: c, timeout: clientTimeout}
		if _, err := w.Write(head); err == nil {
			_, _ = b.WriteTo(w) // an error ends the relay like its end does: the deferred Close
		}
		if w.timedOut {
			p.connMetrics.clientTimeouts.Inc()
			e.relayTimedOut = true
		}
	})
}

// relay is a response waiting for its relay to an HTTP/1.0 client (relayUntilClose): either
// the hijack handler or the client connection's Close claims it, and only the first one runs.
type relay struct {
	b       *upstream.ResponseBody
	claimed atomic.Bool
}

func (r *relay) claim() bool { return r.claimed.CompareAndSwap(false, true) }

// Abandon ends a relay whose hijack handler never ran: the stream is closed, ending the forward.
func (r *relay) Abandon() {
	if r.claim() {
		_ = r.b.Close()
	}
}

// deadlineWriter writes to c with a write deadline of timeout from the start of each Write
// (none when timeout is 0). timedOut records that a write ran past its deadline.
type deadlineWriter struct {
	c        net.Conn
	timeout  time.Duration
	timedOut bool
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	if w.timeout > 0 {
		if err := w.c.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			return 0, err
		}
	}
	n, err := w.c.Write(b)
	var te interface{ Timeout() bool }
	if err != nil && w.timeout > 0 && errors.As(err, &te) && te.Timeout() {
		w.timedOut = true
	}
	return n, err
}
