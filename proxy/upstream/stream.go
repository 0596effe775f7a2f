package upstream

import (
	"io"
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// copyBufferSize is the size of the buffer that carries a streamed body (either way): large
// enough that a fast transfer costs few system calls, small enough that thousands of streams
// at once stay cheap.
const copyBufferSize = 64 << 10

// CopyBuffers pools the buffers of streamed bodies. It is safe for concurrent use and must not
// be copied.
type CopyBuffers struct{ pool sync.Pool }

func (b *CopyBuffers) Get() *[]byte {
	if v, ok := b.pool.Get().(*[]byte); ok {
		return v
	}
	buf := make([]byte, copyBufferSize)
	return &buf
}

func (b *CopyBuffers) Put(buf *[]byte) { b.pool.Put(buf) }

// Copy copies src to dst through a pooled buffer (see CopyBody), as a streamed body's WriteTo
// does: it returns the bytes written and the error that ended the copy, the writer's or else
// the reader's.
func (b *CopyBuffers) Copy(dst io.Writer, src io.Reader, progress func()) (int64, error) {
	buf := b.Get()
	defer b.Put(buf)
	n, rerr, werr := CopyBody(dst, src, *buf, progress)
	if werr != nil {
		return n, werr
	}
	return n, rerr
}

// CopyBody copies src to dst through buf until src ends (io.EOF, which is not an error here)
// or either side fails; after each piece written it calls progress, if set. It returns the
// bytes written and the first error of each side, so a caller can tell which one failed.
func CopyBody(dst io.Writer, src io.Reader, buf []byte, progress func()) (n int64, readErr, writeErr error) {
	for {
		nr, err := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr == nil && nw < nr {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return n, nil, werr
			}
			if progress != nil {
				progress()
			}
		}
		if err == io.EOF {
			return n, nil, nil
		}
		if err != nil {
			return n, err, nil
		}
	}
}

// ResponseBody is a backend's response body streamed to the client: fasthttp's response writer
// reads it (through WriteTo, with a pooled buffer) while it writes the response, and closes it
// when done, written or not. Close ends the transfer: the backend connection goes back to its
// pool if the body was read to its end (else it is closed), and then the body's owner, which
// holds the lease, hears how it ended; so the lease is held until the last byte was handed to
// the client connection, or the client went away. One lives in each BackendConn and serves its
// streamed responses in turn. It is used by one goroutine at a time and must not be copied.
type ResponseBody struct {
	bufs  *CopyBuffers
	pool  *ConnPool
	bc    *BackendConn
	src   io.Reader // the backend connection's reader, or its chunked decoder
	left  int64     // bytes still to come when the length is known, else -1
	keep  bool      // the backend keeps the connection alive after this response
	chunk bool      // src is bc.chunks' decoder
	// direct is the client connection when the body has a known length: it is written there
	// rather than through fasthttp's write buffer (see WriteTo).
	direct net.Conn
	done   bool // the body was read to its end
	open   bool
	// detached makes Close do nothing while fasthttp's response lets go of the stream, which
	// is then relayed on the hijacked connection (relayUntilClose).
	detached bool
	// owner, once set, is told how the transfer ended, by Close; it holds the lease (the
	// forward handed it over, forward.go). sent counts the body's bytes written to the client;
	// cut says how a copy that did not reach the end ended (TransferWhole while none did).
	owner BodyOwner
	sent  int64
	cut   Transfer
}

// BodyOwner is what a streamed body's transfer ends for: the request it answers, which
// releases its lease, records its duration and logs it.
type BodyOwner interface {
	// TransferEnded is called once, by Close, after the backend connection was put back or
	// closed: sent bytes of the body were written to the client, and t says how it ended.
	TransferEnded(sent int64, t Transfer)
}

func (b *ResponseBody) start(pool *ConnPool, bc *BackendConn, src io.Reader, length int64, keep, chunked bool, direct net.Conn) {
	*b = ResponseBody{bufs: pool.shared.bufs, pool: pool, bc: bc, src: src, left: length, keep: keep, chunk: chunked, direct: direct, open: true}
}

// SetOwner makes o the owner, which Close tells how the transfer ended.
func (b *ResponseBody) SetOwner(o BodyOwner) { b.owner = o }

// DetachFrom takes b out of resp, which holds it as its body stream, without closing it: the
// body is then relayed on the hijacked client connection, and closed there.
func (b *ResponseBody) DetachFrom(resp *fasthttp.Response) {
	b.detached = true
	resp.ResetBody()
	b.detached = false
}

// Read reads the body, stopping at its length when known. A backend that closes before the
// end is an error (io.ErrUnexpectedEOF), so the client's response is cut rather than passed
// as complete.
func (b *ResponseBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		b.done = true
		return 0, io.EOF
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.src.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
		if b.left == 0 && (err == nil || err == io.EOF) {
			b.done = true
			return n, io.EOF
		}
		if err == io.EOF {
			return n, io.ErrUnexpectedEOF
		}
		return n, err
	}
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// SupportsBodyWriteTo lets fasthttp's response writer use WriteTo.
func (b *ResponseBody) SupportsBodyWriteTo() bool { return true }

// WriteTo copies the body to the client through a pooled buffer, each piece as soon as it has
// arrived. A chunked body goes through w, fasthttp's chunk writer, which flushes every chunk.
// A body of known length goes straight to the client connection: fasthttp's fixed-length
// writer would keep small pieces in its 4 KiB write buffer until it fills, so a slow body
// would reach the client late. That is sound because the response header has been flushed
// (ImmediateHeaderFlush) before the body is asked for, and fasthttp only checks the byte count
// WriteTo returns.
func (b *ResponseBody) WriteTo(w io.Writer) (int64, error) {
	if b.direct != nil {
		w = b.direct
	}
	buf := b.bufs.Get()
	defer b.bufs.Put(buf)
	n, readErr, writeErr := CopyBody(w, b, *buf, nil)
	b.sent += n
	switch {
	case writeErr != nil:
		b.cut = TransferClientGone
		return n, writeErr
	case readErr != nil:
		wc := b.bc.wc
		b.cut = backendTransfer(wc.isGone(), wc.cut.Load())
		return n, readErr
	}
	return n, nil
}

// Close ends the transfer and tells the owner how it ended; only the first call does anything.
func (b *ResponseBody) Close() error {
	if !b.open || b.detached {
		return nil
	}
	b.open = false
	bc, pool, owner, sent, t := b.bc, b.pool, b.owner, b.sent, streamTransfer(b.cut, b.done)
	if b.chunk {
		_ = bc.chunks.CloseBodyStream()
	}
	reuse := b.done && b.keep
	*b = ResponseBody{} // bc may serve another forward as soon as it is back in the pool
	if reuse {
		pool.put(bc)
	} else {
		bc.close()
	}
	if owner != nil {
		owner.TransferEnded(sent, t)
	}
	return nil
}

// streamTransfer is how a streamed body's transfer ended: as its copy was cut, else whole when
// it was read to its end, else it never got going (the response's head could not be written:
// the client is gone).
func streamTransfer(cut Transfer, done bool) Transfer {
	switch {
	case cut != TransferWhole:
		return cut
	case done:
		return TransferWhole
	}
	return TransferClientGone
}

// Transfer is how the transfer of a response that outlived the handler ended: a streamed body,
// a relay to an HTTP/1.0 client, an upgraded connection. TransferWhole also stands for a
// response the handler answered.
type Transfer uint8

const (
	TransferWhole          Transfer = iota // sent whole
	TransferClientGone                     // the client went away, or could not be written to
	TransferBackendError                   // the backend broke off the body
	TransferBackendTimeout                 // the backend went silent for proxy.backend_timeout
	TransferUpgradeClosed                  // an upgraded connection closed, by either side
)

// backendTransfer is how a streamed body ended that could not be read from its backend
// connection to the end: the watchdog closed it because the client went away (gone), or
// because the backend was silent for the backend timeout (cut), or the backend failed.
func backendTransfer(gone, cut bool) Transfer {
	switch {
	case gone:
		return TransferClientGone
	case cut:
		return TransferBackendTimeout
	}
	return TransferBackendError
}
