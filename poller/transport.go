package poller

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// buffers pools the bufio readers and writers of all targets. Safe for concurrent use; owned by
// one Poller. fasthttp's default transport pools them per HostClient, and with one HostClient
// per target that keeps one or two 4 KiB buffers alive per target between checks, while only
// the checks in flight need one (bench/TUNING.md, "Poller memory").
type buffers struct {
	readers sync.Pool
	writers sync.Pool
}

const (
	// readBufferSize also bounds the answer's headers, as in fasthttp.
	readBufferSize = 4096
	// writeBufferSize fits the whole GET /pool request.
	writeBufferSize = 1024
)

func (b *buffers) reader(conn net.Conn) *bufio.Reader {
	if br, ok := b.readers.Get().(*bufio.Reader); ok {
		br.Reset(conn)
		return br
	}
	return bufio.NewReaderSize(conn, readBufferSize)
}

func (b *buffers) writer(conn net.Conn) *bufio.Writer {
	if bw, ok := b.writers.Get().(*bufio.Writer); ok {
		bw.Reset(conn)
		return bw
	}
	return bufio.NewWriterSize(conn, writeBufferSize)
}

func (b *buffers) release(br *bufio.Reader, bw *bufio.Writer) {
	if br != nil {
		br.Reset(nil)
		b.readers.Put(br)
	}
	if bw != nil {
		bw.Reset(nil)
		b.writers.Put(bw)
	}
}

// transport is one target's fasthttp.RoundTripper: fasthttp's own transport for a plain-HTTP
// GET, with the buffers from a shared pool and one deadline for the whole check. Checks of a
// target never overlap, so deadline is set by the checking goroutine before each Do and read by
// the same goroutine inside it.
type transport struct {
	buffers  *buffers
	deadline time.Time
}

func (t *transport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	cc, err := hc.AcquireConn(time.Until(t.deadline), req.ConnectionClose())
	if err != nil {
		return false, err
	}
	conn := cc.Conn()
	if err := conn.SetDeadline(t.deadline); err != nil {
		hc.CloseConn(cc)
		return true, err
	}
	bw := t.buffers.writer(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	t.buffers.release(nil, bw)
	if err != nil {
		// Most likely a keep-alive connection that the backend closed: worth one retry.
		hc.CloseConn(cc)
		return true, err
	}
	br := t.buffers.reader(conn)
	err = resp.ReadLimitBody(br, hc.MaxResponseBodySize)
	t.buffers.release(br, nil)
	if err != nil {
		hc.CloseConn(cc)
		return !errors.Is(err, fasthttp.ErrBodyTooLarge), err
	}
	if req.ConnectionClose() || resp.ConnectionClose() {
		hc.CloseConn(cc)
	} else {
		hc.ReleaseConn(cc)
	}
	return false, nil
}
