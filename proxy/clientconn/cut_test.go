package clientconn

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A connection cut for late headers is answered once: the 408 is written by a goroutine of the
// scan that cut it, and scans while that write is under way (a slow client, a busy machine)
// leave the connection to it instead of answering and counting it again.
func TestLateHeadersAnsweredOnce(t *testing.T) {
	var now atomic.Int64
	answered := make(chan struct{}, 4)
	release := make(chan struct{})
	var timeouts atomic.Int32
	h := &Hooks{
		Admit: func() bool { return true }, Release: func() {},
		Limits:   func() Limits { return Limits{Header: time.Second} },
		Stopping: func() bool { return false },
		Now:      func() time.Duration { return time.Duration(now.Load()) },
		Yield:    func() {},
		HeaderTimedOut: func(*Conn, time.Duration) {
			timeouts.Add(1)
			answered <- struct{}{}
			<-release // the 408's write, to a client that does not read yet
		},
		Metrics: &Metrics{
			AcceptErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "a"}), Refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "b"}),
			HeaderTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}), ClientTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "d"}),
			IdleTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "e"}), TLSHandshakeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "f"}),
		},
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, nil, h)
	defer l.Close()
	client, server := net.Pipe()
	defer client.Close()
	c := l.track(server)
	if c == nil {
		t.Fatal("track refused the connection")
	}
	var cut []cutConn
	cut, _ = l.scan(cut[:0]) // starts the clock of the header phase
	now.Store(int64(2 * time.Second))
	cut, _ = l.scan(cut[:0]) // past header_timeout: cut, and the 408 is being written
	<-answered
	for range 3 {
		now.Add(int64(time.Second))
		cut, _ = l.scan(cut[:0])
	}
	close(release)
	if n := timeouts.Load(); n != 1 {
		t.Errorf("the late headers were answered %d times, want 1", n)
	}
	if n := len(answered); n != 0 {
		t.Errorf("%d more answers started while the first was written", n)
	}
}
