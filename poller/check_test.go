package poller

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestClassify(t *testing.T) {
	dialErr := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	cases := []struct {
		name       string
		err        error
		wantReason string
		wantResult string
	}{
		{name: "fasthttp timeout", err: fasthttp.ErrTimeout, wantReason: "timeout after 800ms", wantResult: resultTimeout},
		{name: "dial timeout", err: fasthttp.ErrDialTimeout, wantReason: "timeout after 800ms", wantResult: resultTimeout},
		{name: "net timeout", err: &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded},
			wantReason: "timeout after 800ms", wantResult: resultTimeout},
		{name: "body too large", err: fasthttp.ErrBodyTooLarge, wantReason: "body over 4096 bytes", wantResult: resultInvalid},
		{name: "connection refused", err: dialErr(syscall.ECONNREFUSED), wantReason: "connection refused", wantResult: resultError},
		{name: "connection reset", err: fmt.Errorf("read: %w", dialErr(syscall.ECONNRESET)),
			wantReason: "connection reset", wantResult: resultError},
		{name: "closed before answering", err: fasthttp.ErrConnectionClosed,
			wantReason: "connection closed before the answer", wantResult: resultError},
		{name: "host unreachable", err: dialErr(syscall.EHOSTUNREACH), wantReason: "host unreachable", wantResult: resultError},
		// Regression: at 20,000 backends under a 20,000-descriptor limit the reason read
		// "dial tcp 127.0.0.1:13080", cut before "socket: too many open files".
		{name: "out of descriptors", err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 13080},
			Err: os.NewSyscallError("socket", syscall.EMFILE)},
			wantReason: "too many open files in pollbal (raise its open file limit)", wantResult: resultError},
		{name: "out of descriptors system-wide", err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.ENFILE)},
			wantReason: "too many open files in pollbal (raise its open file limit)", wantResult: resultError},
		{name: "dns", err: &net.OpError{Op: "dial", Err: &net.DNSError{Name: "nope.invalid", Err: "no such host"}},
			wantReason: "lookup nope.invalid: no such host", wantResult: resultError},
		{name: "anything else keeps its text", err: errors.New("fasthttp: something odd"),
			wantReason: "something odd", wantResult: resultError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, result := classify(tc.err, 800*time.Millisecond, 4096)
			if reason != tc.wantReason || result != tc.wantResult {
				t.Fatalf("classify(%v) = %q, %q; want %q, %q", tc.err, reason, result, tc.wantReason, tc.wantResult)
			}
		})
	}
}
