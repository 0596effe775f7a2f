package h2

import "golang.org/x/net/http2"

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// HTTP/2 frame types and flags the watch looks at (RFC 9113 §6).
const (
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9
	flagEndHeaders    = 0x4
)

// frameWatch follows the frames a client sends, from the bytes read off its connection in
// whatever pieces they come: it counts RST_STREAM frames and sums a header block (a HEADERS
// frame and its CONTINUATION frames, each with its frame header, so that empty CONTINUATION
// frames count too). It only reads frame headers and skips payloads, so it holds no more
// than one frame header. It is used by the connection's reading goroutine only.
type frameWatch struct {
	skip     int                  // bytes still to skip: the preface, then the current frame's payload
	hdr      [frameHeaderLen]byte // the frame header being gathered
	got      int                  // bytes of hdr gathered
	block    int                  // bytes of the header block in progress; 0: none
	maxBlock int                  // a header block longer than this is a flood
}

// newFrameWatch starts a watch on a connection whose client preface is still to come when
// preface is true. maxBlock is http2.max_header_bytes.
func newFrameWatch(preface bool, maxBlock int) frameWatch {
	w := frameWatch{maxBlock: maxBlock}
	if preface {
		w.skip = len(http2.ClientPreface)
	}
	return w
}

// feed takes the next bytes read from the client. It returns how many RST_STREAM frames
// began in p, and whether a header block went over maxBlock (then the connection is to be
// cut at once and the watch is not fed again). A frame is taken into account as soon as its
// header has arrived, before its payload.
func (w *frameWatch) feed(p []byte) (resets int, flood bool) {
	for len(p) > 0 {
		if w.skip > 0 {
			n := min(w.skip, len(p))
			w.skip -= n
			p = p[n:]
			continue
		}
		n := copy(w.hdr[w.got:], p)
		w.got += n
		p = p[n:]
		if w.got < frameHeaderLen {
			break
		}
		w.got = 0
		length := int(w.hdr[0])<<16 | int(w.hdr[1])<<8 | int(w.hdr[2])
		typ, flags := w.hdr[3], w.hdr[4]
		w.skip = length
		switch typ {
		case frameRSTStream:
			resets++
		case frameHeaders, frameContinuation:
			if typ == frameHeaders {
				w.block = 0
			}
			w.block += frameHeaderLen + length
			if w.block > w.maxBlock {
				return resets, true
			}
			if flags&flagEndHeaders != 0 {
				w.block = 0
			}
		}
	}
	return resets, false
}
