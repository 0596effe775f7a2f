package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"pollbal/internal/testbackend/api"
)

// Limits of the streaming endpoints' parameters.
const (
	maxBlobChunk    = 1 << 20
	defaultBlobPart = 32 << 10
)

// streams counts what the streaming endpoints saw. It is safe for concurrent use and must not be
// copied.
type streams struct {
	blobs     atomic.Int64 // /blob requests whose whole body was written
	cancelled atomic.Int64 // /blob requests whose client connection closed before the end
	uploads   atomic.Int64 // /upload requests read to the end
	lastBytes atomic.Int64 // body bytes of the latest complete /upload
	upgrades  atomic.Int64 // /switch requests answered 101
}

// serveStreamStats answers GET /_backend/streams; /blob, /upload and /switch, the endpoints
// that exercise a proxy's streaming, are below.
func (h *handler) serveStreamStats(w http.ResponseWriter, _ *http.Request) {
	s := &h.streams
	writeJSON(w, api.Streams{
		Blobs: s.blobs.Load(), Cancelled: s.cancelled.Load(), Uploads: s.uploads.Load(),
		UploadBytes: s.lastBytes.Load(), Upgrades: s.upgrades.Load(),
	})
}

// blobParams are the query parameters of /blob.
type blobParams struct {
	size    int64         // body bytes
	chunk   int           // bytes written (and flushed, with a delay) at a time
	delay   time.Duration // pause before each chunk after the first
	hold    time.Duration // pause before the response headers
	chunked bool          // no Content-Length: chunked transfer coding
}

func parseBlob(r *http.Request) (blobParams, error) {
	q := r.URL.Query()
	p := blobParams{chunk: defaultBlobPart, chunked: q.Get("chunked") == "1"}
	var err error
	if p.size, err = strconv.ParseInt(q.Get("size"), 10, 64); err != nil || p.size < 0 {
		return p, errors.New("size must be a byte count")
	}
	if v := q.Get("chunk"); v != "" {
		if p.chunk, err = strconv.Atoi(v); err != nil || p.chunk < 1 || p.chunk > maxBlobChunk {
			return p, errors.New("chunk must be 1..1048576")
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"delay", &p.delay}, {"hold", &p.hold}} {
		if v := q.Get(d.name); v != "" {
			if *d.dst, err = time.ParseDuration(v); err != nil || *d.dst < 0 {
				return p, errors.New(d.name + " must be a duration")
			}
		}
	}
	return p, nil
}

// serveBlob writes size bytes of a repeating pattern, generated chunk by chunk so that the
// backend holds one chunk whatever the size. A client that goes away before the end is counted
// in cancelled.
func (h *handler) serveBlob(w http.ResponseWriter, r *http.Request) {
	p, err := parseBlob(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	done := r.Context().Done()
	if !wait(done, p.hold) {
		h.streams.cancelled.Add(1)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Backend-Id", h.o.ID)
	if !p.chunked {
		w.Header().Set("Content-Length", strconv.FormatInt(p.size, 10))
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, p.chunk)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	for left := p.size; left > 0; {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if left < p.size && !wait(done, p.delay) {
			h.streams.cancelled.Add(1)
			return
		}
		if _, err := w.Write(buf[:n]); err != nil {
			h.streams.cancelled.Add(1)
			return
		}
		if p.delay > 0 {
			if err := rc.Flush(); err != nil {
				h.streams.cancelled.Add(1)
				return
			}
		}
		left -= n
	}
	h.streams.blobs.Add(1)
}

// serveUpload reads the request body to the end, counting and discarding it, and answers the
// count as JSON {"bytes": n}.
func (h *handler) serveUpload(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	h.streams.uploads.Add(1)
	h.streams.lastBytes.Store(n)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int64{"bytes": n})
}

// serveSwitch answers 101 Switching Protocols to any request, upgrade or not, and then holds
// the connection until the peer closes it: the misbehaving backend a proxy must not pass on.
func (h *handler) serveSwitch(w http.ResponseWriter, _ *http.Request) {
	c, _, ok := hijack(w)
	if !ok {
		return
	}
	defer func() { _ = c.Close() }()
	h.streams.upgrades.Add(1)
	if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: example\r\nConnection: Upgrade\r\n\r\n"); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, c)
}
