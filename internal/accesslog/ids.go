package accesslog

import "math/rand/v2"

// Bounds of a request ID that pollbal keeps.
const (
	MaxRequestID = 200
	// NewRequestIDLen is the length of the IDs AppendNewRequestID makes.
	NewRequestIDLen = 32
)

// ValidRequestID reports whether b is an X-Request-Id pollbal keeps: 1 to 200 bytes, each a
// visible ASCII character (0x21 to 0x7e). Any other value is replaced by a new ID.
func ValidRequestID(b []byte) bool {
	if len(b) == 0 || len(b) > MaxRequestID {
		return false
	}
	for _, c := range b {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// AppendNewRequestID appends a new request ID, 32 random lower-case hex digits, to dst. src
// is the randomness, which must be safe for the caller's goroutine; nil takes it from
// math/rand/v2's top-level functions, which are safe for concurrent use.
func AppendNewRequestID(dst []byte, src rand.Source) []byte {
	var hi, lo uint64
	if src == nil {
		hi, lo = rand.Uint64(), rand.Uint64()
	} else {
		hi, lo = src.Uint64(), src.Uint64()
	}
	return appendHex64(appendHex64(dst, hi), lo)
}

func appendHex64(dst []byte, v uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[v>>shift&0xf])
	}
	return dst
}

// The fixed layout of a W3C traceparent (Trace Context level 1):
// version "-" trace-id "-" parent-id "-" trace-flags, each field lower-case hex.
const (
	traceparentLen = 55 // 2 + 1 + 32 + 1 + 16 + 1 + 2
	traceIDStart   = 3
	traceIDEnd     = 35
	parentIDEnd    = 52
)

// TraceID returns the trace-id of a traceparent header when the header is valid by W3C Trace
// Context level 1: a version of two lower-case hex digits other than ff; for version 00
// exactly `00-<32 hex>-<16 hex>-<2 hex>`; for a later version at least that, followed by "-"
// when there is more; trace-id and parent-id not all zeros. The trace-id is a subslice of
// traceparent (capacity cut at its end).
func TraceID(traceparent []byte) (traceID []byte, ok bool) {
	tp := traceparent
	if len(tp) < traceparentLen ||
		!lowerHex(tp[:2]) || tp[0] == 'f' && tp[1] == 'f' ||
		tp[2] != '-' || tp[traceIDEnd] != '-' || tp[parentIDEnd] != '-' ||
		!lowerHex(tp[traceIDStart:traceIDEnd]) || allZeros(tp[traceIDStart:traceIDEnd]) ||
		!lowerHex(tp[traceIDEnd+1:parentIDEnd]) || allZeros(tp[traceIDEnd+1:parentIDEnd]) ||
		!lowerHex(tp[parentIDEnd+1:traceparentLen]) {
		return nil, false
	}
	switch {
	case tp[0] == '0' && tp[1] == '0':
		if len(tp) != traceparentLen {
			return nil, false
		}
	case len(tp) > traceparentLen && tp[traceparentLen] != '-':
		return nil, false
	}
	return tp[traceIDStart:traceIDEnd:traceIDEnd], true
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZeros(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}
