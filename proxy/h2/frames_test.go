package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frames writes a client's frames (after the preface when preface is true) with x/net's Framer.
func frames(t *testing.T, preface bool, write func(fr *http2.Framer)) []byte {
	t.Helper()
	var b bytes.Buffer
	if preface {
		b.WriteString(http2.ClientPreface)
	}
	write(http2.NewFramer(&b, nil))
	return b.Bytes()
}

func TestFrameWatch(t *testing.T) {
	block := func(n int) []byte { return bytes.Repeat([]byte{0x40}, n) }
	tests := []struct {
		name       string
		preface    bool
		maxBlock   int
		write      func(fr *http2.Framer)
		wantResets int
		wantFlood  bool
	}{
		{name: "settings and a request", preface: true, maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteSettings()
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(100), EndHeaders: true, EndStream: true})
		}},
		{name: "resets counted", preface: true, maxBlock: 4096, write: func(fr *http2.Framer) {
			for id := uint32(1); id < 20; id += 2 {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(10), EndHeaders: true})
				_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}, wantResets: 10},
		{name: "preface already read", maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
			_ = fr.WriteData(3, true, block(5000)) // a payload is skipped, whatever it holds
			_ = fr.WriteRSTStream(3, http2.ErrCodeCancel)
		}, wantResets: 2},
		{name: "block within the limit across continuations", maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(1000)})
			_ = fr.WriteContinuation(1, false, block(1000))
			_ = fr.WriteContinuation(1, true, block(1000))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(3000), EndHeaders: true})
		}},
		{name: "block over the limit", maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(2000)})
			_ = fr.WriteContinuation(1, false, block(2000))
			_ = fr.WriteContinuation(1, false, block(2000))
		}, wantFlood: true},
		{name: "empty continuations count their frame headers", maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(10)})
			for range 1000 {
				_ = fr.WriteContinuation(1, false, nil)
			}
		}, wantFlood: true},
		{name: "one large single frame block", maxBlock: 4096, write: func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(5000), EndHeaders: true})
		}, wantFlood: true},
	}
	for _, tt := range tests {
		for _, piece := range []int{1, 7, 9, 4096, 1 << 20} {
			p := frames(t, tt.preface, tt.write)
			w := newFrameWatch(tt.preface, tt.maxBlock)
			resets, cut := 0, verdict("")
			for len(p) > 0 && cut == "" {
				n := min(piece, len(p))
				var r int
				r, cut = w.feed(p[:n])
				resets += r
				p = p[n:]
			}
			if flood := cut == reasonContinuation; resets != tt.wantResets || flood != tt.wantFlood || (cut != "" && !flood) {
				t.Errorf("%s, read %d bytes at a time: %d resets, cut %q; want %d, flood %v",
					tt.name, piece, resets, cut, tt.wantResets, tt.wantFlood)
			}
		}
	}
}

// The watch decodes every header block in step with the server and cuts a connection whose
// request carries a connection-specific field (RFC 9113 §8.2.2), once the block is whole,
// whatever the frames' padding, priority, splitting into CONTINUATION frames, or references
// into the dynamic table that earlier blocks filled.
func TestFrameWatchFindsConnectionSpecificFields(t *testing.T) {
	request := func(extra ...hpack.HeaderField) []hpack.HeaderField {
		return append([]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: "www.test"}, {Name: ":path", Value: "/"}}, extra...)
	}
	custom := hpack.HeaderField{Name: "x-custom", Value: "kept in the dynamic table"}
	tests := []struct {
		name   string
		blocks [][]hpack.HeaderField // one request each, encoded by one encoder in order
		split  int                   // >0: each block goes out in CONTINUATION frames of this size
		padded bool                  // HEADERS frames padded, with a priority
		want   verdict
	}{
		{name: "ordinary requests", blocks: [][]hpack.HeaderField{request(custom), request(custom), request()}},
		{name: "te: trailers is allowed", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "te", Value: "trailers"})}},
		{name: "connection", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "connection", Value: "keep-alive"})}, want: reasonMalformed},
		{name: "keep-alive", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "keep-alive", Value: "timeout=5"})}, want: reasonMalformed},
		{name: "proxy-connection", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "proxy-connection", Value: "close"})}, want: reasonMalformed},
		{name: "transfer-encoding", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "transfer-encoding", Value: "chunked"})}, want: reasonMalformed},
		{name: "upgrade", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "upgrade", Value: "websocket"})}, want: reasonMalformed},
		{name: "te other than trailers", blocks: [][]hpack.HeaderField{request(hpack.HeaderField{Name: "te", Value: "gzip"})}, want: reasonMalformed},
		{name: "after requests that filled the dynamic table", blocks: [][]hpack.HeaderField{request(custom), request(custom),
			request(custom, hpack.HeaderField{Name: "connection", Value: "close"})}, want: reasonMalformed},
		{name: "in CONTINUATION frames", split: 5, blocks: [][]hpack.HeaderField{request(custom),
			request(custom, hpack.HeaderField{Name: "upgrade", Value: "h2c"})}, want: reasonMalformed},
		{name: "padded with a priority", padded: true, blocks: [][]hpack.HeaderField{request(custom),
			request(hpack.HeaderField{Name: "te", Value: "deflate"})}, want: reasonMalformed},
		{name: "padded, split, ordinary", padded: true, split: 3, blocks: [][]hpack.HeaderField{request(custom), request(custom)}},
	}
	for _, tt := range tests {
		var enc bytes.Buffer
		e := hpack.NewEncoder(&enc)
		p := frames(t, true, func(fr *http2.Framer) {
			_ = fr.WriteSettings()
			for i, fields := range tt.blocks {
				enc.Reset()
				for _, f := range fields {
					_ = e.WriteField(f)
				}
				block := enc.Bytes()
				first := block
				if tt.split > 0 {
					first = block[:min(tt.split, len(block))]
				}
				id := uint32(2*i + 1)
				param := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: true, EndHeaders: len(first) == len(block)}
				if tt.padded {
					param.PadLength = 7
					param.Priority = http2.PriorityParam{StreamDep: 0, Weight: 15}
				}
				_ = fr.WriteHeaders(param)
				for rest := block[len(first):]; len(rest) > 0; {
					n := min(tt.split, len(rest))
					_ = fr.WriteContinuation(id, n == len(rest), rest[:n])
					rest = rest[n:]
				}
			}
		})
		for _, piece := range []int{1, 7, 9, 4096} {
			w := newFrameWatch(true, 1<<16)
			var cut verdict
			for q := p; len(q) > 0 && cut == ""; {
				n := min(piece, len(q))
				_, cut = w.feed(q[:n])
				q = q[n:]
			}
			if cut != tt.want {
				t.Errorf("%s, read %d bytes at a time: cut %q, want %q", tt.name, piece, cut, tt.want)
			}
		}
	}
}
