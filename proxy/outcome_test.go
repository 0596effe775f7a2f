package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/proxy/upstream"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want outcome
	}{
		{name: "success", err: nil, want: outcomeOK},
		{name: "connection refused", err: &upstream.DialError{Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, want: outcomeNotSent},
		{name: "dial timeout is a dial error", err: &upstream.DialError{Err: fasthttp.ErrDialTimeout}, want: outcomeNotSent},
		{name: "fasthttp timeout", err: fasthttp.ErrTimeout, want: outcomeTimeout},
		{name: "read deadline", err: &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, want: outcomeTimeout},
		{name: "closed before the first byte", err: fasthttp.ErrConnectionClosed, want: outcomeConnFailed},
		{name: "reset while reading headers", err: fmt.Errorf("error when reading response headers: %w", syscall.ECONNRESET), want: outcomeConnFailed},
		{name: "broken pipe on write", err: &net.OpError{Op: "write", Err: syscall.EPIPE}, want: outcomeConnFailed},
		{name: "truncated body", err: io.ErrUnexpectedEOF, want: outcomeConnFailed},
		{name: "response too large", err: fasthttp.ErrBodyTooLarge, want: outcomeBadResponse},
		{name: "unparsable response", err: errors.New("error when reading response headers: cannot find whitespace"), want: outcomeBadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		name       string
		o          outcome
		idempotent bool
		want       bool
	}{
		{name: "nothing sent, POST", o: outcomeNotSent, want: true},
		{name: "nothing sent, GET", o: outcomeNotSent, idempotent: true, want: true},
		{name: "connection failed, POST", o: outcomeConnFailed},
		{name: "connection failed, GET", o: outcomeConnFailed, idempotent: true, want: true},
		{name: "timeout, GET", o: outcomeTimeout, idempotent: true},
		{name: "bad response, GET", o: outcomeBadResponse, idempotent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.o, tt.idempotent); got != tt.want {
				t.Errorf("retryable = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBackendError is the table from a failed attempt to what the balancer is told (Failed, or
// TimedOut) and its pollbal_backend_errors_total reason: every outcome, with the errors that
// tell refused from connect.
func TestBackendError(t *testing.T) {
	refused := &upstream.DialError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	tests := []struct {
		name   string
		o      outcome
		err    error
		as     balancer.Outcome
		want   balancer.ErrorReason
		wantOK bool
	}{
		{name: "dial refused", o: outcomeNotSent, err: refused, as: balancer.Failed, want: balancer.ErrorRefused, wantOK: true},
		{name: "dial timed out", o: outcomeNotSent, err: &upstream.DialError{Err: fasthttp.ErrDialTimeout}, as: balancer.Failed, want: balancer.ErrorConnect, wantOK: true},
		{name: "host unreachable", o: outcomeNotSent, err: &upstream.DialError{Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}}, as: balancer.Failed, want: balancer.ErrorConnect, wantOK: true},
		{name: "name does not resolve", o: outcomeNotSent, err: &upstream.DialError{Err: &net.DNSError{Err: "no such host", Name: "backend.invalid", IsNotFound: true}}, as: balancer.Failed, want: balancer.ErrorConnect, wantOK: true},
		{name: "reset after sending", o: outcomeConnFailed, err: syscall.ECONNRESET, as: balancer.Failed, want: balancer.ErrorReset, wantOK: true},
		{name: "closed before an answer", o: outcomeConnFailed, err: io.EOF, as: balancer.Failed, want: balancer.ErrorReset, wantOK: true},
		{name: "no answer in time", o: outcomeTimeout, err: fasthttp.ErrTimeout, as: balancer.TimedOut, want: balancer.ErrorTimeout, wantOK: true},
		{name: "unusable answer", o: outcomeBadResponse, err: upstream.ErrUnexpectedSwitch, as: balancer.Failed, want: balancer.ErrorBadResponse, wantOK: true},
		{name: "answered", o: outcomeOK},
		{name: "refused as full is not an error", o: outcomeFull},
		{name: "client went away", o: outcomeClientGone, err: upstream.ErrClientGone},
		{name: "client left the queue", o: outcomeLeftQueue},
		{name: "body too large", o: outcomeBodyTooLarge, err: errBodyTooLarge},
		{name: "no candidate", o: outcomeNoCandidate},
		{name: "queue full", o: outcomeQueueFull},
		{name: "queue timeout", o: outcomeQueueTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as, got, ok := backendError(tt.o, tt.err)
			if ok != tt.wantOK || (ok && (as != tt.as || got != tt.want)) {
				t.Errorf("backendError = %v, %v, %v; want %v, %v, %v", as, got, ok, tt.as, tt.want, tt.wantOK)
			}
		})
	}
}

func TestIdempotent(t *testing.T) {
	tests := []struct {
		name   string
		method string
		want   bool
	}{
		{name: "GET", method: "GET", want: true},
		{name: "HEAD", method: "HEAD", want: true},
		{name: "OPTIONS", method: "OPTIONS", want: true},
		{name: "PUT", method: "PUT", want: true},
		{name: "DELETE", method: "DELETE", want: true},
		{name: "TRACE", method: "TRACE", want: true},
		{name: "POST", method: "POST", want: false},
		{name: "PATCH", method: "PATCH", want: false},
		{name: "CONNECT", method: "CONNECT", want: false},
		{name: "lower-case get is another method", method: "get", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idempotent([]byte(tt.method)); got != tt.want {
				t.Errorf("idempotent(%q) = %v, want %v", tt.method, got, tt.want)
			}
		})
	}
}
