//go:build unix

package upstream

import (
	"bufio"
	"bytes"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkBackendTimeout compares, in one run, the two ways of bounding a round trip to a
// backend by proxy.backend_timeout: "watchdog" (pollbal's: an atomic mark per Write and Read
// of the connection, a scan every WatchdogTick), "deadline" (a time.Now and a
// SetWriteDeadline and SetReadDeadline per request, as net/http and fasthttp's HostClient do)
// and "none" (no bound: the floor both are measured against). One op is one keep-alive GET
// over loopback to a fasthttp backend answering 1 KiB, sent and read through the same bufio
// buffers a BackendConn uses; "parallel" runs one connection per goroutine. Besides the time
// per op it reports cpu-ns/op, the process's CPU time (user and system, the backend's
// included) per op, which a shared machine disturbs less. Compare with benchstat -col /bound
// (bench/TUNING.md).
func BenchmarkBackendTimeout(b *testing.B) {
	addr := benchBackend(b)
	const timeout = 30 * time.Second
	w := NewWatchdog(NewMonoClock(), func() time.Duration { return timeout }, func(net.Conn) bool { return false })
	dial := map[string]func(tb testing.TB) net.Conn{
		"none": func(tb testing.TB) net.Conn { return dialBench(tb, addr) },
		// The deadline variant dials plainly and sets its deadlines in roundTripBench.
		"deadline": func(tb testing.TB) net.Conn { return dialBench(tb, addr) },
		"watchdog": func(tb testing.TB) net.Conn {
			wc, err := w.dial(addr)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = wc.Close() })
			return wc
		},
	}
	for _, par := range []bool{false, true} {
		name := "serial"
		if par {
			name = "parallel"
		}
		for _, bound := range []string{"none", "deadline", "watchdog"} {
			b.Run(name+"/bound="+bound, func(b *testing.B) {
				b.ReportAllocs()
				cpu := cpuTime(b)
				defer func() { b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op") }()
				if !par {
					rt := newBenchTrip(dial[bound](b), bound == "deadline", timeout)
					for b.Loop() {
						rt.do(b)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					rt := newBenchTrip(dial[bound](b), bound == "deadline", timeout)
					for pb.Next() {
						rt.do(b)
					}
				})
			})
		}
	}
}

// benchBody is what the benchmark's backend answers: 1 KiB.
var benchBody = bytes.Repeat([]byte("0123456789abcdef"), 64)

// benchBackend starts a fasthttp server on 127.0.0.1 that answers benchBody, and returns its
// address.
func benchBackend(tb testing.TB) string {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(benchBody) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return ln.Addr().String()
}

func dialBench(tb testing.TB, addr string) net.Conn {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// benchTrip is one connection's round trip for BenchmarkBackendTimeout.
type benchTrip struct {
	c        net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	req      fasthttp.Request
	resp     fasthttp.Response
	deadline bool
	timeout  time.Duration
}

func newBenchTrip(c net.Conn, deadline bool, timeout time.Duration) *benchTrip {
	t := &benchTrip{
		c: c, deadline: deadline, timeout: timeout,
		br: bufio.NewReaderSize(c, ReadBufferSize),
		bw: bufio.NewWriterSize(c, writeBufferSize),
	}
	t.req.SetRequestURI("/index.html")
	t.req.Header.SetHost("www.shop.test")
	return t
}

func (t *benchTrip) do(tb testing.TB) {
	if t.deadline {
		d := time.Now().Add(t.timeout)
		if err := t.c.SetWriteDeadline(d); err != nil {
			tb.Fatal(err)
		}
		if err := t.c.SetReadDeadline(d); err != nil {
			tb.Fatal(err)
		}
	}
	if err := t.req.Write(t.bw); err != nil {
		tb.Fatal(err)
	}
	if err := t.bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	t.resp.Reset()
	if err := t.resp.Read(t.br); err != nil {
		tb.Fatal(err)
	}
	if len(t.resp.Body()) != len(benchBody) {
		tb.Fatalf("answer of %d bytes, want %d", len(t.resp.Body()), len(benchBody))
	}
}

// cpuTime is the CPU time, user and system, the process has used so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
