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
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want outcome
	}{
		{name: "success", err: nil, want: outcomeOK},
		{name: "connection refused", err: &dialError{err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, want: outcomeNotSent},
		{name: "dial timeout is a dial error", err: &dialError{err: fasthttp.ErrDialTimeout}, want: outcomeNotSent},
		{name: "connection limit", err: fasthttp.ErrNoFreeConns, want: outcomeBusy},
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
		name            string
		o               outcome
		idempotent      bool
		wantRetry       bool
		wantUnreachable bool
	}{
		{name: "nothing sent, POST", o: outcomeNotSent, wantRetry: true, wantUnreachable: true},
		{name: "nothing sent, GET", o: outcomeNotSent, idempotent: true, wantRetry: true, wantUnreachable: true},
		{name: "our connection limit", o: outcomeBusy, wantRetry: true},
		{name: "connection failed, POST", o: outcomeConnFailed, wantUnreachable: true},
		{name: "connection failed, GET", o: outcomeConnFailed, idempotent: true, wantRetry: true, wantUnreachable: true},
		{name: "timeout, GET", o: outcomeTimeout, idempotent: true},
		{name: "bad response, GET", o: outcomeBadResponse, idempotent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryable(tt.o, tt.idempotent); got != tt.wantRetry {
				t.Errorf("retryable = %v, want %v", got, tt.wantRetry)
			}
			if got := unreachable(tt.o); got != tt.wantUnreachable {
				t.Errorf("unreachable = %v, want %v", got, tt.wantUnreachable)
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
