package h2

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"pollbal/internal/metrictest"
)

// readCounter is a client connection that has sent data, all at once, and counts the reads
// made of it.
type readCounter struct {
	net.Conn
	data  *bytes.Reader
	reads int
}

func (r *readCounter) Read(p []byte) (int, error) {
	r.reads++
	return r.data.Read(p)
}

func newWatchedConn(t *testing.T, data []byte) (*clientConn, *readCounter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(Options{Handler: func(*fasthttp.RequestCtx) {}, MaxHeaderBytes: 1024, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	rc := &readCounter{Conn: a, data: bytes.NewReader(data)}
	return newClientConn(rc, ProtoCleartext, s, newFrameWatch(true, s.maxHdr)), rc, reg
}

// The HTTP/2 server reads a frame's header and its payload apart: frames the client sent
// together must come out of one read of the connection.
func TestClientConnReadsFramesTogether(t *testing.T) {
	data := frames(t, true, func(fr *http2.Framer) {
		_ = fr.WriteSettings()
		for id := uint32(1); id < 20; id += 2 {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true, EndStream: true})
		}
	})
	c, rc, _ := newWatchedConn(t, data)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := c.Read(preface); err != nil || string(preface) != http2.ClientPreface {
		t.Fatalf("preface %q, %v", preface, err)
	}
	fr := http2.NewFramer(nil, c)
	for i := range 11 {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if rc.reads != 1 {
		t.Errorf("%d reads of the connection for 11 frames sent together, want 1", rc.reads)
	}
}

// A header block over max_header_bytes is cut off before the server reads any of the bytes
// that came with it, and counted.
func TestClientConnCutsFloodBeforeServerReads(t *testing.T) {
	data := frames(t, true, func(fr *http2.Framer) {
		_ = fr.WriteSettings()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
		for range 200 {
			_ = fr.WriteContinuation(1, false, nil)
		}
	})
	c, _, reg := newWatchedConn(t, data)
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, errCutOff) || n != 0 {
		t.Errorf("first read: %d bytes, %v; want 0, the cut", n, err)
	}
	if v, _ := metrictest.Value(t, reg, `pollbal_http2_resets_total{proto="h2c",reason="continuation"}`); v != 1 {
		t.Errorf("continuation cuts counted %v, want 1", v)
	}
}
