package accesslog

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"pollbal/internal/testproc"
)

func TestValidRequestID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "uuid", in: "0b7c3a52-2f1e-4a7e-9d1e-2f6c8d1e5a3b", want: true},
		{name: "one byte", in: "x", want: true},
		{name: "every visible byte", in: visibleASCII(), want: true},
		{name: "200 bytes", in: strings.Repeat("a", 200), want: true},
		{name: "empty", in: ""},
		{name: "201 bytes", in: strings.Repeat("a", 201)},
		{name: "space", in: "a b"},
		{name: "tab", in: "a\tb"},
		{name: "newline (header injection)", in: "a\r\nX-Evil: 1"},
		{name: "NUL", in: "a\x00"},
		{name: "DEL", in: "a\x7f"},
		{name: "UTF-8", in: "café"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidRequestID([]byte(tt.in)); got != tt.want {
				t.Errorf("ValidRequestID(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// visibleASCII is every byte from 0x21 to 0x7e once.
func visibleASCII() string {
	var b []byte
	for c := byte(0x21); c <= 0x7e; c++ {
		b = append(b, c)
	}
	return string(b)
}

// FuzzValidRequestID compares ValidRequestID with the rule written as a regular expression.
// Run it with: go test ./internal/accesslog -run '^$' -fuzz FuzzValidRequestID -fuzztime 30s
func FuzzValidRequestID(f *testing.F) {
	for _, seed := range []string{"", "abc", "a b", strings.Repeat("z", 200), strings.Repeat("z", 201), "\x7f", "é"} {
		f.Add([]byte(seed))
	}
	rule := regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidRequestID(b), rule.Match(b); got != want {
			t.Errorf("ValidRequestID(%q) = %v, want %v", b, got, want)
		}
	})
}

var newIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestAppendNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := AppendNewRequestID(nil, nil)
		if !newIDRe.Match(id) {
			t.Fatalf("new ID %q is not 32 lower-case hex digits", id)
		}
		if !ValidRequestID(id) {
			t.Fatalf("new ID %q is not a valid request ID", id)
		}
		if seen[string(id)] {
			t.Fatalf("new ID %q made twice in 1000", id)
		}
		seen[string(id)] = true
	}
	// With a source given, the ID is its two next numbers in hex, appended to dst.
	src := rand.NewPCG(1, 2)
	want := rand.NewPCG(1, 2)
	got := AppendNewRequestID([]byte("rid="), src)
	if w := "rid=" + hex64(want.Uint64()) + hex64(want.Uint64()); string(got) != w {
		t.Errorf("AppendNewRequestID with a PCG source = %s, want %s", got, w)
	}
}

func hex64(v uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

func TestTraceID(t *testing.T) {
	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
		valid    = "00-" + traceID + "-" + parentID + "-01"
	)
	tests := []struct {
		name string
		in   string
		want string // "" when invalid
	}{
		{name: "W3C example", in: valid, want: traceID},
		{name: "flags 00", in: "00-" + traceID + "-" + parentID + "-00", want: traceID},
		{name: "unknown flags are kept", in: "00-" + traceID + "-" + parentID + "-ff", want: traceID},
		{name: "later version, same length", in: "01-" + traceID + "-" + parentID + "-01", want: traceID},
		{name: "later version with more fields", in: "cc-" + traceID + "-" + parentID + "-01-what-the-future-holds", want: traceID},
		{name: "later version, dash and nothing more", in: "fe-" + traceID + "-" + parentID + "-01-", want: traceID},

		{name: "empty", in: ""},
		{name: "version ff is invalid", in: "ff-" + traceID + "-" + parentID + "-01"},
		{name: "version 00 with more", in: valid + "-01"},
		{name: "version 00 with a trailing space", in: valid + " "},
		{name: "later version without a dash after the flags", in: "01-" + traceID + "-" + parentID + "-01x"},
		{name: "upper-case trace-id", in: "00-" + strings.ToUpper(traceID) + "-" + parentID + "-01"},
		{name: "upper-case version", in: "0A-" + traceID + "-" + parentID + "-01"},
		{name: "upper-case flags", in: "00-" + traceID + "-" + parentID + "-0A"},
		{name: "all-zero trace-id", in: "00-" + strings.Repeat("0", 32) + "-" + parentID + "-01"},
		{name: "all-zero parent-id", in: "00-" + traceID + "-" + strings.Repeat("0", 16) + "-01"},
		{name: "short trace-id", in: "00-" + traceID[:31] + "-" + parentID + "-01"},
		{name: "short parent-id", in: "00-" + traceID + "-" + parentID[:15] + "-01"},
		{name: "one-digit flags", in: "00-" + traceID + "-" + parentID + "-1"},
		{name: "underscores", in: "00_" + traceID + "_" + parentID + "_01"},
		{name: "non-hex in trace-id", in: "00-" + traceID[:31] + "g-" + parentID + "-01"},
		{name: "non-hex in parent-id", in: "00-" + traceID + "-" + parentID[:15] + "z-01"},
		{name: "non-hex version", in: "0g-" + traceID + "-" + parentID + "-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := TraceID([]byte(tt.in))
			if ok != (tt.want != "") || string(got) != tt.want {
				t.Errorf("TraceID(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

// TestTraceIDIsASubsliceItsCallerCannotGrowIntoTheHeader: appending to the trace-id copies it
// instead of writing over the rest of the header.
func TestTraceIDIsASubsliceItsCallerCannotGrowIntoTheHeader(t *testing.T) {
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	id, ok := TraceID(tp)
	if !ok {
		t.Fatal("valid traceparent rejected")
	}
	if &id[0] != &tp[3] {
		t.Error("trace-id is a copy, want a subslice of the header")
	}
	_ = append(id, 'X')
	if string(tp[35:]) != "-00f067aa0ba902b7-01" {
		t.Errorf("appending to the trace-id changed the header: %q", tp)
	}
}

// traceparentRe is W3C Trace Context level 1's traceparent as a regular expression: the
// reference FuzzTraceID holds TraceID to.
var traceparentRe = regexp.MustCompile(`(?s)^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$`)

// FuzzTraceID compares TraceID with the rule written as a regular expression plus its few
// conditions.
// Run it with: go test ./internal/accesslog -run '^$' -fuzz FuzzTraceID -fuzztime 30s
func FuzzTraceID(f *testing.F) {
	for _, seed := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, tp []byte) {
		got, ok := TraceID(tp)
		m := traceparentRe.FindSubmatch(tp)
		want := m != nil && string(m[1]) != "ff" &&
			!bytes.Equal(m[2], bytes.Repeat([]byte("0"), 32)) && !bytes.Equal(m[3], bytes.Repeat([]byte("0"), 16)) &&
			(string(m[1]) != "00" || len(m[5]) == 0)
		if ok != want {
			t.Fatalf("TraceID(%q) ok = %v, want %v", tp, ok, want)
		}
		if ok && !bytes.Equal(got, m[2]) {
			t.Errorf("TraceID(%q) = %q, want %q", tp, got, m[2])
		}
	})
}

// TestIDsAllocs: the request ID and trace context helpers allocate nothing.
func TestIDsAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	dst := make([]byte, 0, 64)
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	src := rand.NewPCG(1, 2)
	tests := map[string]func(){
		"AppendNewRequestID":               func() { dst = AppendNewRequestID(dst[:0], nil) },
		"AppendNewRequestID with a source": func() { dst = AppendNewRequestID(dst[:0], src) },
		"ValidRequestID":                   func() { _ = ValidRequestID(tp) },
		"TraceID":                          func() { _, _ = TraceID(tp) },
	}
	for name, f := range tests {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}
