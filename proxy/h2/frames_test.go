package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
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
			resets, flood := 0, false
			for len(p) > 0 && !flood {
				n := min(piece, len(p))
				var r int
				r, flood = w.feed(p[:n])
				resets += r
				p = p[n:]
			}
			if resets != tt.wantResets || flood != tt.wantFlood {
				t.Errorf("%s, read %d bytes at a time: %d resets, flood %v; want %d, %v",
					tt.name, piece, resets, flood, tt.wantResets, tt.wantFlood)
			}
		}
	}
}
