package proxy

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/proxy/upstream"
)

// outcome is how one step of a forward ended (forward.go): a try, a retry or a wait in the queue.
type outcome uint8

const (
	outcomeOK            outcome = iota // the backend answered; its response is in ctx.Response
	outcomeUpgraded                     // the backend switched protocols: the upgraded connection has the request
	outcomeNoCandidate                  // the balancer had no candidate left (or the queue none to wait for)
	outcomeBehindWaiters                // a first try found others waiting in the queue: it waits behind them
	outcomeNotSent                      // no connection could be had: dial failed; nothing was sent
	outcomeConnFailed                   // the connection failed after the request was (maybe) sent
	outcomeTimeout                      // no complete answer within proxy.backend_timeout
	outcomeBadResponse                  // the backend answered something that is not a usable response
	outcomeClientGone                   // the client went away, or failed while sending its body
	outcomeBodyTooLarge                 // a streamed request body grew over proxy.max_request_body
	outcomeFull                         // the backend refused it as full (503 + X-Pool-Full) before doing any work
	outcomeQueueFull                    // no candidate, and the pool's queue was full
	outcomeQueueTimeout                 // no candidate, and no slot came within proxy.queue_timeout
	outcomeLeftQueue                    // no candidate, and the client went away while queued
)

// classify maps the error of a round trip to an outcome.
func classify(err error) outcome {
	if err == nil {
		return outcomeOK
	}
	var de *upstream.DialError
	if errors.As(err, &de) {
		return outcomeNotSent
	}
	if errors.Is(err, upstream.ErrClientGone) {
		return outcomeClientGone
	}
	if errors.Is(err, upstream.ErrUnexpectedSwitch) || errors.Is(err, upstream.ErrTooManyInterim) {
		return outcomeBadResponse
	}
	if errors.Is(err, fasthttp.ErrTimeout) {
		return outcomeTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return outcomeTimeout
	}
	if errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) {
		return outcomeConnFailed
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return outcomeConnFailed
	}
	return outcomeBadResponse
}

// retryable reports whether a failed attempt may be repeated on another candidate: always when
// nothing was sent, and after a failed connection only for idempotent methods, which a backend
// may see twice. A timeout is never retried: the backend may still be working on the request.
func retryable(o outcome, idempotent bool) bool {
	switch o {
	case outcomeNotSent:
		return true
	case outcomeConnFailed:
		return idempotent
	}
	return false
}

// backendError is what a failed attempt tells the balancer, and under which reason. The call is
// Failed or TimedOut; the reason is counted in pollbal_backend_errors_total (and, for every
// reason but bad_response, towards eject_after). ok is false for an attempt that did not fail
// because of the backend (the client went away, its body was too large). A dial the backend's
// host refused is refused; any other dial failure (a timeout, an unreachable host) is connect.
func backendError(o outcome, err error) (as balancer.Outcome, r balancer.ErrorReason, ok bool) {
	switch o {
	case outcomeNotSent:
		if errors.Is(err, syscall.ECONNREFUSED) {
			return balancer.Failed, balancer.ErrorRefused, true
		}
		return balancer.Failed, balancer.ErrorConnect, true
	case outcomeConnFailed:
		return balancer.Failed, balancer.ErrorReset, true
	case outcomeTimeout:
		return balancer.TimedOut, balancer.ErrorTimeout, true
	case outcomeBadResponse:
		return balancer.Failed, balancer.ErrorBadResponse, true
	}
	return 0, 0, false
}

// idempotent reports whether a request method may be repeated without changing its effect
// (RFC 9110 §9.2.2).
func idempotent(method []byte) bool {
	switch string(method) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodOptions,
		fasthttp.MethodPut, fasthttp.MethodDelete, fasthttp.MethodTrace:
		return true
	}
	return false
}
