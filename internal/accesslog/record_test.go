package accesslog

import (
	"bytes"
	"reflect"
	"testing"

	"pollbal/internal/testproc"
)

func TestEndString(t *testing.T) {
	want := map[End]string{
		EndOK: "ok", EndClientGone: "client_gone", EndClientTimeout: "client_timeout",
		EndBackendTimeout: "backend_timeout", EndBackendError: "backend_error", EndRefused: "refused",
		EndUpgradeClosed: "upgrade_closed", endCount: "unknown", 200: "unknown",
	}
	for e, w := range want {
		if got := e.String(); got != w {
			t.Errorf("End(%d).String() = %q, want %q", e, got, w)
		}
	}
	if got := (Record{}).End; got != EndOK {
		t.Errorf("a new Record's End is %v, want ok", got)
	}
}

func TestHeadersOf(t *testing.T) {
	got := HeadersOf([]string{"Referer", "User-Agent", "X-Forwarded-For"})
	want := []Header{{"Referer", "referer"}, {"User-Agent", "user_agent"}, {"X-Forwarded-For", "x_forwarded_for"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("HeadersOf = %v, want %v", got, want)
	}
	if got := HeadersOf(nil); got != nil {
		t.Errorf("HeadersOf(nil) = %v, want nil", got)
	}
}

// TestReset: a reset Record is the zero Record but for the storage it keeps, and holds no
// reference into the last request's buffers.
func TestReset(t *testing.T) {
	r := proxiedRecord()
	r.OwnBytes()
	values := r.HeaderValues
	r.Reset()
	if cap(r.HeaderValues) != cap(values) || len(r.HeaderValues) != 0 {
		t.Errorf("HeaderValues after Reset: len %d cap %d, want 0 and %d", len(r.HeaderValues), cap(r.HeaderValues), cap(values))
	}
	for i, v := range values {
		if v != nil {
			t.Errorf("HeaderValues[%d] still points at %q after Reset", i, v)
		}
	}
	if cap(r.own) == 0 {
		t.Error("Reset dropped OwnBytes' storage")
	}
	r.HeaderValues, r.own = nil, nil
	if !reflect.DeepEqual(*r, Record{}) {
		t.Errorf("after Reset: %+v, want the zero Record", *r)
	}
}

// TestOwnBytes: after OwnBytes, the request's buffers can be reused and the line stays the
// same.
func TestOwnBytes(t *testing.T) {
	r := hostileRecord()
	want := AppendJSON(nil, r)
	var buffers [][]byte
	for _, f := range r.byteFields() {
		buffers = append(buffers, *f)
	}
	buffers = append(buffers, r.HeaderValues...)
	r.OwnBytes()
	for _, b := range buffers {
		for i := range b {
			b[i] = 'X' // the server reuses its buffers
		}
	}
	if got := AppendJSON(nil, r); !bytes.Equal(got, want) {
		t.Errorf("after OwnBytes and the buffers' reuse the line is\n%s\nwant\n%s", got, want)
	}
	// Appending to an owned field must not write over the next one.
	_ = append(r.RequestID, "overflow"...)
	if got := AppendJSON(nil, r); !bytes.Equal(got, want) {
		t.Errorf("appending to RequestID changed the line to\n%s", got)
	}
}

// TestOwnBytesAllocs: once a Record's storage has grown, OwnBytes allocates nothing.
func TestOwnBytesAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	r, fresh := hostileRecord(), hostileRecord()
	r.OwnBytes()
	if n := testing.AllocsPerRun(100, func() {
		own, values := r.own, r.HeaderValues
		*r = *fresh
		r.own, r.HeaderValues = own, append(values[:0], fresh.HeaderValues...)
		r.OwnBytes()
	}); n != 0 {
		t.Errorf("OwnBytes with grown storage: %v allocations", n)
	}
}
