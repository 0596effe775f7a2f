package balancer

import (
	"net/http"
	"time"
)

// ErrorReason is why a forward to a backend failed: the reason label of
// pollbal_backend_errors_total.
type ErrorReason uint8

const (
	// ErrorConnect: no connection could be made for another reason than a refusal (the dial
	// timed out, the host is unreachable, the name does not resolve); nothing was sent.
	ErrorConnect ErrorReason = iota
	// ErrorRefused: the backend's host refused the connection (nothing listens on the port);
	// nothing was sent.
	ErrorRefused
	// ErrorTimeout: no complete answer within proxy.backend_timeout.
	ErrorTimeout
	// ErrorReset: the connection broke (closed or reset) after the request was, maybe, sent,
	// and before an answer came.
	ErrorReset
	// ErrorBadResponse: the backend answered something that is not a usable response.
	ErrorBadResponse

	numErrorReasons
)

// String is the reason's label value.
func (r ErrorReason) String() string {
	switch r {
	case ErrorConnect:
		return "connect"
	case ErrorRefused:
		return "refused"
	case ErrorTimeout:
		return "timeout"
	case ErrorReset:
		return "reset"
	case ErrorBadResponse:
		return "bad_response"
	}
	return "unknown"
}

// ejects reports whether a failed forward counts towards proxy.eject_after: the backend could
// not be reached, dropped the connection without an answer, or did not answer in time. An
// unusable answer does not: the backend is there and answers.
func ejects(r ErrorReason) bool {
	switch r {
	case ErrorConnect, ErrorRefused, ErrorTimeout, ErrorReset:
		return true
	}
	return false
}

// ejectsAnswer reports whether a backend's answer with status code counts towards
// proxy.eject_after, as a failed forward does: only a 502, 503 or 504 under proxy.eject_on_5xx.
// A 503 refusal with X-Pool-Full never comes here (it is reported as RefusedFull).
func ejectsAnswer(code int, ejectOn5xx bool) bool {
	switch code {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ejectOn5xx
	}
	return false
}

// failureLogEvery is the least time between two warn lines about one backend's failed forwards.
const failureLogEvery = time.Second

// logDue reports whether a failed forward at now (Unix nanoseconds) may be logged when the last
// line about the same backend was written at last (0: never).
func logDue(last, now int64) bool {
	return last == 0 || now-last >= int64(failureLogEvery)
}

// logFailure writes the warn line for a failed forward on rt of a request of app, served from
// pool, at most once per failureLogEvery per backend; the line counts the failures left out
// since the previous one.
func (b *Balancer) logFailure(rt *Backend, app, pool string, reason ErrorReason, err error) {
	now := b.now().UnixNano()
	last := rt.lastLogged.Load()
	if !logDue(last, now) || !rt.lastLogged.CompareAndSwap(last, now) {
		rt.unlogged.Add(1)
		return
	}
	b.log.Warn("forward to backend failed", "backend", rt.ID, "app", app, "pool", pool,
		"reason", reason.String(), "error", err, "not_logged_since_last", rt.unlogged.Swap(0))
}
