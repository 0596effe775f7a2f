package h2

import (
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// HTTP/2 frame types and flags the watch looks at (RFC 9113 §6).
const (
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9
	flagEndHeaders    = 0x4
	flagPadded        = 0x8
	flagPriority      = 0x20
)

// headerTableSize is the HPACK dynamic table size the server decodes with
// (http2.Server.MaxDecoderHeaderTableSize): the watch's decoder must use the same, so that
// both decode every block to the same fields.
const headerTableSize = 4096

// keptFragment is the largest fragment buffer the watch keeps between header blocks; one
// gathered for a larger frame (up to maxBlock) is let go once decoded.
const keptFragment = 16 << 10

// verdict is what the watch found wrong with a connection, the reason it is cut off; "" when
// nothing.
type verdict = string

// frameWatch follows the frames a client sends, from the bytes read off its connection in
// whatever pieces they come: it counts RST_STREAM frames, sums a header block (a HEADERS
// frame and its CONTINUATION frames, each with its frame header, so that empty CONTINUATION
// frames count too), and decodes each header block with a decoder of its own, kept in step
// with the server's, to find connection-specific fields (RFC 9113 §8.2.2). It skips every
// other payload, and holds at most one header block's fragments (maxBlock bytes). It is used
// by the connection's reading goroutine only.
type frameWatch struct {
	skip     int                  // bytes still to skip: the preface, then a payload it does not read
	hdr      [frameHeaderLen]byte // the frame header being gathered
	got      int                  // bytes of hdr gathered
	block    int                  // bytes of the header block in progress; 0: none
	maxBlock int                  // a header block longer than this is a flood

	// A HEADERS or CONTINUATION payload being gathered: need bytes still to come into frag.
	need   int
	flags  byte
	typ    byte
	frag   []byte
	dec    *hpack.Decoder // made at the first header block, where the watch stays
	decOff bool           // a block failed to decode: the server ends the connection on it
	connSp bool           // the block being decoded holds a connection-specific field
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

// field looks at one decoded header field.
func (w *frameWatch) field(f hpack.HeaderField) {
	if forbiddenField(f) {
		w.connSp = true
	}
}

// forbiddenField reports a field an HTTP/2 message must not carry (RFC 9113 §8.2.2): the
// HTTP/1.1 connection's own fields, and TE with anything but "trailers".
func forbiddenField(f hpack.HeaderField) bool {
	switch f.Name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return true
	case "te":
		return f.Value != "trailers"
	}
	return false
}

// feed takes the next bytes read from the client. It returns how many RST_STREAM frames
// began in p, and a verdict: reasonContinuation when a header block went over maxBlock (known
// from its frame header, before its payload), reasonMalformed when a header block holds a
// connection-specific field (known once the block is whole). On a verdict the connection is to
// be cut at once, before the server reads the frame, and the watch is not fed again.
func (w *frameWatch) feed(p []byte) (resets int, cut verdict) {
	for len(p) > 0 {
		if w.need > 0 {
			n := min(w.need, len(p))
			w.frag = append(w.frag, p[:n]...)
			w.need -= n
			p = p[n:]
			if w.need == 0 {
				malformed := w.decodeFragment()
				if cap(w.frag) > keptFragment {
					w.frag = nil // a large fragment's buffer is not held for the connection's life
				}
				if malformed {
					return resets, reasonMalformed
				}
			}
			continue
		}
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
		switch typ {
		case frameRSTStream:
			resets++
			w.skip = length
		case frameHeaders, frameContinuation:
			if typ == frameHeaders {
				w.block = 0
			}
			w.block += frameHeaderLen + length
			if w.block > w.maxBlock {
				return resets, reasonContinuation
			}
			if w.decOff {
				w.skip = length
				break
			}
			if w.dec == nil {
				w.dec = hpack.NewDecoder(headerTableSize, w.field)
				// No string is longer than the block it comes in: this bounds what the
				// decoder keeps of a field split across fragments.
				w.dec.SetMaxStringLength(w.maxBlock)
			}
			w.typ, w.flags, w.need, w.frag = typ, flags, length, w.frag[:0]
			if length == 0 && w.decodeFragment() {
				return resets, reasonMalformed
			}
		default:
			w.skip = length
		}
		if flags&flagEndHeaders != 0 && (typ == frameHeaders || typ == frameContinuation) {
			w.block = 0
		}
	}
	return resets, ""
}

// decodeFragment decodes the header block fragment of the frame just gathered, and at the
// block's end reports whether it held a connection-specific field. A fragment that does not
// decode stops the decoding for the connection: the server's decoder fails on the same bytes
// and ends the connection itself.
func (w *frameWatch) decodeFragment() (malformed bool) {
	frag := w.frag
	if w.typ == frameHeaders {
		pad := 0
		if w.flags&flagPadded != 0 {
			if len(frag) < 1 {
				w.decOff = true
				return false
			}
			pad, frag = int(frag[0]), frag[1:]
		}
		if w.flags&flagPriority != 0 {
			if len(frag) < 5 {
				w.decOff = true
				return false
			}
			frag = frag[5:]
		}
		if pad > len(frag) {
			w.decOff = true
			return false
		}
		frag = frag[:len(frag)-pad]
		w.connSp = false
	}
	if _, err := w.dec.Write(frag); err != nil {
		w.decOff = true
		return false
	}
	if w.flags&flagEndHeaders == 0 {
		return false
	}
	if err := w.dec.Close(); err != nil {
		w.decOff = true
		return false
	}
	return w.connSp
}
