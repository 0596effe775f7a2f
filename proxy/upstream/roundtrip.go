package upstream

import (
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/protocol"
)

// MaxInterim bounds the informational (1xx) responses skipped before the final one.
const MaxInterim = 16

// ErrUnexpectedSwitch is a 101 Switching Protocols to a request that was not forwarded as an
// upgrade: the connection no longer speaks HTTP, so the answer cannot be passed on.
var ErrUnexpectedSwitch = errors.New("backend switched protocols on a plain request")

// ErrTooManyInterim is a backend that sent more than MaxInterim informational responses.
var ErrTooManyInterim = errors.New("backend sent too many informational responses")

// ErrClientGone is a forward ended because its client went away: the watchdog closed the
// backend connection.
var ErrClientGone = errors.New("client went away")

// refusedAsFull reports whether a backend's response is a refusal as full: 503 with X-Pool-Full.
func refusedAsFull(resp *fasthttp.Response) bool {
	return resp.StatusCode() == fasthttp.StatusServiceUnavailable && resp.Header.Peek(protocol.HeaderFull) != nil
}

// Upload is a request body that is streamed from the client while it is sent (RoundTrip).
type Upload interface {
	// SendOn is told the connection the body is written to, before the first byte: the
	// backend timeout must not run while the body waits for the client (WatchConn.AwaitClient).
	SendOn(c *WatchConn)
	// ClientFailed reports whether reading the body from the client failed.
	ClientFailed() bool
}

// mayHaveAnswered reports whether sending a request failed in a way that an answer from the
// backend may explain: writing to the backend connection failed because the backend closed or
// reset it (EPIPE, ECONNRESET), which a backend does after answering early. It is false when
// reading the body from the client failed (the client's own reset is an ECONNRESET too), and
// for a connection closed on pollbal's side (the watchdog's timeout or a client that went
// away), on which nothing can be read any more.
func mayHaveAnswered(err error, up Upload) bool {
	if up != nil && up.ClientFailed() {
		return false
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// detach takes c out of the watchdog's care for an upgraded connection: no backend timeout, no
// client checks.
func (c *BackendConn) detach() {
	c.wc.setClient(nil)
	c.wc.w.forget(c.wc)
}

// fail closes c after err, and returns the error to report: ErrClientGone when the watchdog
// closed c because the client went away.
func (c *BackendConn) fail(err error) error {
	gone := c.wc.isGone()
	c.close()
	if gone {
		return ErrClientGone
	}
	return err
}

// TripKind is how a round trip ended.
type TripKind uint8

const (
	TripFailed   TripKind = iota // no usable answer: the error says why
	TripWhole                    // the answer is in ctx.Response, read whole; the connection is back in its pool or closed
	TripStreamed                 // ctx.Response holds the body as a stream (*ResponseBody), which holds the connection until it is closed
	TripSwitched                 // the backend switched protocols for an upgrade: Trip.Conn is the caller's now
	TripRefused                  // the backend refused the request as full (503 with X-Pool-Full) before doing any work
)

// Trip is the result of a round trip.
type Trip struct {
	Kind TripKind
	Conn *BackendConn  // TripSwitched: the connection, out of its pool and unwatched
	Head time.Duration // when the answer's head had come, on the watchdog's clock; 0 when not asked or none came
}

// RoundTrip sends ctx.Request to the backend of p and reads its response into
// ctx.Response, on a connection the watchdog watches (backend timeout, and the client going
// away). A backend may answer before it has read the whole request and close (RFC 9112 §9.5:
// a 413 to a large upload, say): when sending fails so, an answer that came whole is still
// read and passed on, as the backend's response and not as a failure. An answer without a
// body (to HEAD, a 204, a 304) retires its connection. A small response is read whole and the
// connection goes back to the pool at once (TripWhole); a larger one is left in ctx.Response
// as a body stream that holds the connection until fasthttp has written it to the client
// (TripStreamed). A refusal as full is never passed on (TripRefused): its connection is
// reused when its body was small, else closed unread. up is the request body when it is
// streamed (nil: buffered in ctx.Request). When upgrade is set (a WebSocket handshake) and the
// backend answers 101, the connection leaves its pool and the watchdog for the caller
// (TripSwitched). With timed set, Trip.Head says when the answer's head had come.
//
// On failure the error says what went wrong: a *DialError when nothing was sent.
func (p *ConnPool) RoundTrip(ctx *fasthttp.RequestCtx, up Upload, upgrade, timed bool) (Trip, error) {
	pool := p
	// A streamed body cannot be sent again, so it never goes out on a kept-alive connection
	// that the backend may have closed meanwhile.
	bc, err := pool.Get(up != nil)
	if err != nil {
		return Trip{}, err
	}
	req, resp := &ctx.Request, &ctx.Response
	req.URI().DisablePathNormalizing = true
	if up != nil {
		up.SendOn(bc.wc)
	}
	if err = req.Write(bc.bw); err == nil {
		err = bc.bw.Flush()
	}
	// A send cut short by the backend may have been cut short by its answer: the answer, if
	// one came whole, is read below like any other, on a connection that is then closed.
	sendErr := err
	if sendErr != nil && !mayHaveAnswered(sendErr, up) {
		return Trip{}, bc.fail(sendErr)
	}
	// Only now may the watchdog peek at the client connection: a peek waits for the socket's
	// read lock, which a streamed request body's blocking read holds (and a client that goes
	// away meanwhile fails that read anyway).
	bc.wc.setClient(ctx.Conn())
	if sendErr == nil {
		if yield := p.shared.yield; yield != nil {
			yield() // the answer takes the backend a wakeup and a turn on a CPU at least
		}
	}

	resp.ResetBody()
	resp.Header.DisableNormalizing()
	for n := 0; ; n++ {
		if err = resp.Header.Read(bc.br); err != nil {
			if sendErr != nil {
				err = sendErr // no answer: the backend broke off the request
			}
			return Trip{}, bc.fail(err)
		}
		code := resp.StatusCode()
		if code >= 200 || code == 101 {
			break
		}
		if n == MaxInterim {
			// The final answer is still to come: the connection cannot be used any more.
			return Trip{}, bc.fail(ErrTooManyInterim)
		}
	}
	var headAt time.Duration
	if timed {
		headAt = p.clock.Now()
	}
	if upgrade && sendErr == nil && resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
		bc.detach()
		return Trip{Kind: TripSwitched, Conn: bc, Head: headAt}, nil
	}
	whole := TripWhole
	if refusedAsFull(resp) {
		whole = TripRefused
	}
	head := req.Header.IsHead()
	length := resp.Header.ContentLength()
	keep := sendErr == nil && !resp.Header.ConnectionClose()
	switch planResponse(resp.StatusCode(), head, length) {
	case respUnusable:
		bc.close()
		return Trip{Head: headAt}, ErrUnexpectedSwitch
	case respNoBody:
		resp.SkipBody = head
		pool.retire(bc) // never reused: late bytes could pass for the next request's answer
		return Trip{Kind: whole, Head: headAt}, nil
	case respBuffer:
		if err = resp.ReadBody(bc.br, 0); err != nil {
			return Trip{Head: headAt}, bc.fail(err)
		}
	case respStream:
		if whole == TripRefused {
			// Its body is of no use, and the connection cannot be reused without reading it.
			bc.close()
			return Trip{Kind: TripRefused, Head: headAt}, nil
		}
		if length == -1 {
			ch := &bc.chunks
			ch.Header.SetContentLength(-1)
			ch.StreamBody = true
			if err = ch.ReadBody(bc.br, 0); err != nil {
				return Trip{Head: headAt}, bc.fail(err)
			}
			bc.body.start(pool, bc, ch.BodyStream(), -1, keep, true, nil)
		} else {
			if length < 0 { // until the backend closes: the connection cannot be reused
				keep = false
			}
			var direct net.Conn
			if length >= 0 {
				direct = ctx.Conn()
			}
			bc.body.start(pool, bc, bc.br, int64(length), keep, false, direct)
		}
		if length < 0 {
			length = -1 // chunked to the client
		}
		resp.SetBodyStream(&bc.body, length)
		resp.ImmediateHeaderFlush = true // a slow body's client sees the answer begin at once
		return Trip{Kind: TripStreamed, Head: headAt}, nil
	}
	if keep {
		pool.put(bc)
	} else {
		bc.close()
	}
	return Trip{Kind: whole, Head: headAt}, nil
}
