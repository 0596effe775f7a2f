package upstream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCopyBody(t *testing.T) {
	errRead, errWrite := errors.New("read failed"), errors.New("write failed")
	data := bytes.Repeat([]byte("0123456789"), 1000)
	tests := []struct {
		name          string
		src           io.Reader
		dst           io.Writer
		wantN         int64
		wantRead      error
		wantWrite     error
		wantProgress  int
		wantDstLength int
	}{
		{name: "to the end", src: bytes.NewReader(data), dst: &bytes.Buffer{}, wantN: 10000, wantProgress: 3, wantDstLength: 10000},
		{name: "source fails", src: &failingIO{n: 5000, err: errRead}, dst: &bytes.Buffer{}, wantN: 5000, wantRead: errRead, wantProgress: 2, wantDstLength: 5000},
		{name: "destination fails", src: bytes.NewReader(data), dst: &failingIO{n: 6000, err: errWrite}, wantN: 6000, wantWrite: errWrite, wantProgress: 1},
		{name: "empty source", src: bytes.NewReader(nil), dst: &bytes.Buffer{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			progress := 0
			n, rerr, werr := CopyBody(tt.dst, tt.src, make([]byte, 4096), func() { progress++ })
			if n != tt.wantN || !errors.Is(rerr, tt.wantRead) || !errors.Is(werr, tt.wantWrite) || (tt.wantRead == nil) != (rerr == nil) || (tt.wantWrite == nil) != (werr == nil) {
				t.Fatalf("CopyBody = %d, %v, %v; want %d, %v, %v", n, rerr, werr, tt.wantN, tt.wantRead, tt.wantWrite)
			}
			if progress != tt.wantProgress {
				t.Errorf("progress called %d times, want %d", progress, tt.wantProgress)
			}
			if b, ok := tt.dst.(*bytes.Buffer); ok && b.Len() != tt.wantDstLength {
				t.Errorf("destination got %d bytes, want %d", b.Len(), tt.wantDstLength)
			}
		})
	}
}

func TestResponseBodyRead(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		length   int64
		wantBody string
		wantErr  error
		wantDone bool
	}{
		{name: "stops at its length", src: "hello, and the next response", length: 5, wantBody: "hello", wantDone: true},
		{name: "backend closes early", src: "hel", length: 5, wantBody: "hel", wantErr: io.ErrUnexpectedEOF},
		{name: "until the backend closes", src: "all of it", length: -1, wantBody: "all of it", wantDone: true},
		{name: "empty", src: "", length: 0, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &ResponseBody{src: strings.NewReader(tt.src), left: tt.length, open: true}
			got, err := io.ReadAll(b)
			if string(got) != tt.wantBody || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("read %q, %v; want %q, %v", got, err, tt.wantBody, tt.wantErr)
			}
			if b.done != tt.wantDone {
				t.Errorf("done = %v, want %v", b.done, tt.wantDone)
			}
		})
	}
}

func TestStreamTransfer(t *testing.T) {
	tests := []struct {
		name string
		cut  Transfer
		done bool
		want Transfer
	}{
		{name: "read to its end and written", done: true, want: TransferWhole},
		{name: "never asked for (the head could not be written)", want: TransferClientGone},
		{name: "the last write failed", cut: TransferClientGone, done: true, want: TransferClientGone},
		{name: "the backend broke off", cut: TransferBackendError, want: TransferBackendError},
	}
	for _, tt := range tests {
		if got := streamTransfer(tt.cut, tt.done); got != tt.want {
			t.Errorf("%s: streamTransfer = %d, want %d", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		gone, cut bool
		want      Transfer
	}{
		{want: TransferBackendError},
		{cut: true, want: TransferBackendTimeout},
		{gone: true, want: TransferClientGone},
		{gone: true, cut: true, want: TransferClientGone},
	} {
		if got := backendTransfer(tt.gone, tt.cut); got != tt.want {
			t.Errorf("backendTransfer(gone %v, cut %v) = %d, want %d", tt.gone, tt.cut, got, tt.want)
		}
	}
}

// failingIO fails its Read or Write after n bytes.
type failingIO struct {
	n   int
	err error
}

func (f *failingIO) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func (f *failingIO) Write(p []byte) (int, error) {
	if f.n < len(p) {
		k := f.n
		f.n = 0
		return k, f.err
	}
	f.n -= len(p)
	return len(p), nil
}
