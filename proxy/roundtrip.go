package proxy

import (
	"errors"
	"net"
	"syscall"

	"github.com/valyala/fasthttp"
)

// maxInterim bounds the informational (1xx) responses skipped before the final one.
const maxInterim = 16

// errUnexpectedSwitch is a 101 Switching Protocols to a request that was not forwarded as an
// upgrade: the connection no longer speaks HTTP, so the answer cannot be passed on.
var errUnexpectedSwitch = errors.New("backend switched protocols on a plain request")

// errTooManyInterim is a backend that sent more than maxInterim informational responses.
var errTooManyInterim = errors.New("backend sent too many informational responses")

// errClientGone is a forward ended because its client went away: the watchdog closed the
// backend connection.
var errClientGone = errors.New("client went away")

// mayHaveAnswered reports whether sending a request failed in a way that an answer from the
// backend may explain: writing to the backend connection failed because the backend closed or
// reset it (EPIPE, ECONNRESET), which a backend does after answering early. It is false when
// reading the body from the client failed (up.clientErr; the client's own reset is an
// ECONNRESET too), and for a connection closed on pollbal's side (the watchdog's timeout or a
// client that went away), on which nothing can be read any more.
func mayHaveAnswered(err error, up *uploadBody) bool {
	if up != nil && up.clientErr != nil {
		return false
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// detach takes c out of the watchdog's care for an upgraded connection: no backend timeout, no
// client checks.
func (c *backendConn) detach() {
	c.wc.setClient(nil)
	c.wc.w.forget(c.wc)
}

// fail closes c after err, and returns the error to report: errClientGone when the watchdog
// closed c because the client went away.
func (c *backendConn) fail(err error) error {
	gone := c.wc.isGone()
	c.close()
	if gone {
		return errClientGone
	}
	return err
}

// tripKind is how a round trip that got an answer ended.
type tripKind uint8

const (
	tripFailed   tripKind = iota // no usable answer: the error says why
	tripWhole                    // the answer is in ctx.Response, read whole; the connection is back in its pool or closed
	tripStreamed                 // ctx.Response holds the body as a stream (*responseBody), which holds the connection until it is closed
	tripSwitched                 // the backend switched protocols for an upgrade: trip.conn is the caller's now
	tripRefused                  // the backend refused the request as full (503 with X-Pool-Full) before doing any work
)

// trip is the result of a round trip.
type trip struct {
	kind tripKind
	conn *backendConn // tripSwitched: the connection, out of its pool and unwatched
}

// roundTrip sends ctx.Request to the backend of pool and reads its response into
// ctx.Response, on a connection the watchdog watches (backend timeout, and the client going
// away). A backend may answer before it has read the whole request and close (RFC 9112 §9.5:
// a 413 to a large upload, say): when sending fails so, an answer that came whole is still
// read and passed on, as the backend's response and not as a failure. An answer without a
// body (to HEAD, a 204, a 304) retires its connection. A small response is read whole and the
// connection goes back to the pool at once (tripWhole); a larger one is left in ctx.Response
// as a body stream that holds the connection until fasthttp has written it to the client
// (tripStreamed). A refusal as full is never passed on (tripRefused): its connection is
// reused when its body was small, else closed unread. up is the request body when it is
// streamed (nil: buffered in ctx.Request). When upgrade is set (a WebSocket handshake) and the
// backend answers 101, the connection leaves its pool and the watchdog for the caller
// (tripSwitched). e gets the time the answer's head took (upstream_ms).
//
// On failure the error says what went wrong: a *dialError when nothing was sent.
func (p *Proxy) roundTrip(ctx *fasthttp.RequestCtx, pool *connPool, e *logEntry, up *uploadBody, upgrade bool) (trip, error) {
	// A streamed body cannot be sent again, so it never goes out on a kept-alive connection
	// that the backend may have closed meanwhile.
	bc, err := pool.get(up != nil)
	if err != nil {
		return trip{}, err
	}
	req, resp := &ctx.Request, &ctx.Response
	req.URI().DisablePathNormalizing = true
	if up != nil {
		up.wc = bc.wc
	}
	if err = req.Write(bc.bw); err == nil {
		err = bc.bw.Flush()
	}
	// A send cut short by the backend may have been cut short by its answer: the answer, if
	// one came whole, is read below like any other, on a connection that is then closed.
	sendErr := err
	if sendErr != nil && !mayHaveAnswered(sendErr, up) {
		return trip{}, bc.fail(sendErr)
	}
	// Only now may the watchdog peek at the client connection: a peek waits for the socket's
	// read lock, which a streamed request body's blocking read holds (and a client that goes
	// away meanwhile fails that read anyway).
	bc.wc.setClient(ctx.Conn())
	if sendErr == nil {
		p.yieldIfBusy() // the answer takes the backend a wakeup and a turn on a CPU at least
	}

	resp.ResetBody()
	resp.Header.DisableNormalizing()
	for n := 0; ; n++ {
		if err = resp.Header.Read(bc.br); err != nil {
			if sendErr != nil {
				err = sendErr // no answer: the backend broke off the request
			}
			return trip{}, bc.fail(err)
		}
		code := resp.StatusCode()
		if code >= 200 || code == 101 {
			break
		}
		if n == maxInterim {
			// The final answer is still to come: the connection cannot be used any more.
			return trip{}, bc.fail(errTooManyInterim)
		}
	}
	if e.on {
		e.rec.Upstream = p.clock.now() - e.began
	}
	if upgrade && sendErr == nil && resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
		bc.detach()
		return trip{kind: tripSwitched, conn: bc}, nil
	}
	whole := tripWhole
	if refusedAsFull(resp) {
		whole = tripRefused
	}
	head := req.Header.IsHead()
	length := resp.Header.ContentLength()
	keep := sendErr == nil && !resp.Header.ConnectionClose()
	switch planResponse(resp.StatusCode(), head, length) {
	case respUnusable:
		bc.close()
		return trip{}, errUnexpectedSwitch
	case respNoBody:
		resp.SkipBody = head
		pool.retire(bc) // never reused: late bytes could pass for the next request's answer
		return trip{kind: whole}, nil
	case respBuffer:
		if err = resp.ReadBody(bc.br, 0); err != nil {
			return trip{}, bc.fail(err)
		}
	case respStream:
		if whole == tripRefused {
			// Its body is of no use, and the connection cannot be reused without reading it.
			bc.close()
			return trip{kind: tripRefused}, nil
		}
		if length == -1 {
			ch := &bc.chunks
			ch.Header.SetContentLength(-1)
			ch.StreamBody = true
			if err = ch.ReadBody(bc.br, 0); err != nil {
				return trip{}, bc.fail(err)
			}
			bc.body.start(p, pool, bc, ch.BodyStream(), -1, keep, true, nil)
		} else {
			if length < 0 { // until the backend closes: the connection cannot be reused
				keep = false
			}
			var direct net.Conn
			if length >= 0 {
				direct = ctx.Conn()
			}
			bc.body.start(p, pool, bc, bc.br, int64(length), keep, false, direct)
		}
		if length < 0 {
			length = -1 // chunked to the client
		}
		resp.SetBodyStream(&bc.body, length)
		resp.ImmediateHeaderFlush = true // a slow body's client sees the answer begin at once
		return trip{kind: tripStreamed}, nil
	}
	if keep {
		pool.put(bc)
	} else {
		bc.close()
	}
	return trip{kind: whole}, nil
}
