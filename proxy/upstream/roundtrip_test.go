package upstream

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

// TestMayHaveAnswered: only a write that the backend's close or reset cut short is worth
// reading an answer after.
func TestMayHaveAnswered(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		up   Upload
		want bool
	}{
		{name: "broken pipe", err: &net.OpError{Op: "write", Err: syscall.EPIPE}, want: true},
		{name: "reset", err: &net.OpError{Op: "write", Err: syscall.ECONNRESET}, want: true},
		{name: "reset while streaming the body", err: fmt.Errorf("copy: %w", syscall.ECONNRESET), up: fakeUpload{}, want: true},
		{name: "the client reset while sending its body", err: syscall.ECONNRESET, up: fakeUpload{failed: true}},
		{name: "the body grew over the limit", err: errors.New("request body over the limit"), up: fakeUpload{failed: true}},
		{name: "closed on pollbal's side", err: net.ErrClosed},
		{name: "the client sent less than announced", err: errors.New("copied 3 bytes from body stream instead of 5 bytes")},
		{name: "timeout", err: &net.OpError{Op: "write", Err: errTimeout{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayHaveAnswered(tt.err, tt.up); got != tt.want {
				t.Errorf("mayHaveAnswered(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

// fakeUpload is an Upload whose client failed or not.
type fakeUpload struct{ failed bool }

func (fakeUpload) SendOn(*WatchConn)    {}
func (u fakeUpload) ClientFailed() bool { return u.failed }

func TestPlanResponse(t *testing.T) {
	tests := []struct {
		name   string
		status int
		head   bool
		length int
		want   respPlan
	}{
		{name: "small", status: 200, length: 1024, want: respBuffer},
		{name: "empty", status: 200, length: 0, want: respBuffer},
		{name: "at the buffer size", status: 200, length: bufferResponseBody, want: respBuffer},
		{name: "over the buffer size", status: 200, length: bufferResponseBody + 1, want: respStream},
		{name: "chunked", status: 200, length: -1, want: respStream},
		{name: "until close", status: 200, length: -2, want: respStream},
		{name: "large error page", status: 500, length: 1 << 20, want: respStream},
		{name: "HEAD of a large body", status: 200, head: true, length: 1 << 30, want: respNoBody},
		{name: "no content", status: 204, length: -2, want: respNoBody},
		{name: "not modified", status: 304, length: 1 << 20, want: respNoBody},
		{name: "switching protocols", status: 101, length: -2, want: respUnusable},
		{name: "switching protocols to HEAD", status: 101, head: true, length: 0, want: respUnusable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := planResponse(tt.status, tt.head, tt.length); got != tt.want {
				t.Errorf("planResponse(%d, %v, %d) = %d, want %d", tt.status, tt.head, tt.length, got, tt.want)
			}
		})
	}
}
