package protocol

import (
	"strconv"
	"testing"
)

func TestParseLoad(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		inFlight int64
		capacity int64
		ok       bool
	}{
		{name: "in flight and capacity", value: "12/64", inFlight: 12, capacity: 64, ok: true},
		{name: "in flight only", value: "12", inFlight: 12, ok: true},
		{name: "zero in flight", value: "0/8", inFlight: 0, capacity: 8, ok: true},
		{name: "over capacity is a valid report", value: "9/8", inFlight: 9, capacity: 8, ok: true},
		{name: "nine digits", value: "999999999/999999999", inFlight: 999999999, capacity: 999999999, ok: true},
		{name: "leading zeros are digits", value: "007/010", inFlight: 7, capacity: 10, ok: true},
		{name: "empty", value: ""},
		{name: "ten digits", value: "1234567890"},
		{name: "ten digit capacity", value: "1/1234567890"},
		{name: "capacity zero", value: "0/0"},
		{name: "slash without capacity", value: "3/"},
		{name: "slash without in flight", value: "/8"},
		{name: "negative", value: "-1/8"},
		{name: "plus sign", value: "+1/8"},
		{name: "inner space", value: "1 /8"},
		{name: "trailing space", value: "1/8 "},
		{name: "two slashes", value: "1/8/9"},
		{name: "fraction", value: "1.5/8"},
		{name: "hex", value: "0x10"},
		{name: "words", value: "busy"},
		{name: "percent", value: "50%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, c, err := ParseLoad([]byte(tt.value))
			if (err == nil) != tt.ok {
				t.Fatalf("ParseLoad(%q) err = %v, want ok=%v", tt.value, err, tt.ok)
			}
			if tt.ok && (n != tt.inFlight || c != tt.capacity) {
				t.Errorf("ParseLoad(%q) = %d, %d; want %d, %d", tt.value, n, c, tt.inFlight, tt.capacity)
			}
		})
	}
}

func FuzzParseLoad(f *testing.F) {
	for _, s := range []string{"12/64", "12", "0/0", "", "1/", "999999999/1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		n, c, err := ParseLoad(v)
		if err != nil {
			return
		}
		if n < 0 || c < 0 || n > 999999999 || c > 999999999 {
			t.Fatalf("ParseLoad(%q) = %d, %d: out of range", v, n, c)
		}
	})
}

func TestFormatLoad(t *testing.T) {
	tests := []struct {
		name               string
		inFlight, capacity int64
		want               string
	}{
		{name: "with capacity", inFlight: 12, capacity: 64, want: "12/64"},
		{name: "idle", inFlight: 0, capacity: 2, want: "0/2"},
		{name: "no capacity", inFlight: 5, capacity: 0, want: "5"},
		{name: "negative capacity is none", inFlight: 5, capacity: -1, want: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatLoad(tt.inFlight, tt.capacity); got != tt.want {
				t.Fatalf("FormatLoad(%d, %d) = %q, want %q", tt.inFlight, tt.capacity, got, tt.want)
			}
		})
	}
}

// FuzzFormatLoad checks that ParseLoad reads back every value FormatLoad writes within the
// grammar's nine digits, and rejects every longer one.
func FuzzFormatLoad(f *testing.F) {
	f.Add(int64(12), int64(64))
	f.Add(int64(0), int64(0))
	f.Add(int64(999999999), int64(1000000000))
	f.Fuzz(func(t *testing.T, inFlight, capacity int64) {
		if inFlight < 0 {
			return // a count of requests is never negative
		}
		v := FormatLoad(inFlight, capacity)
		n, c, err := ParseLoad([]byte(v))
		fits := len(strconv.FormatInt(inFlight, 10)) <= 9 && (capacity <= 0 || len(strconv.FormatInt(capacity, 10)) <= 9)
		if !fits {
			if err == nil {
				t.Fatalf("ParseLoad(%q) accepted more than nine digits: %d, %d", v, n, c)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseLoad(FormatLoad(%d, %d) = %q): %v", inFlight, capacity, v, err)
		}
		if n != inFlight || c != max(capacity, 0) {
			t.Fatalf("ParseLoad(%q) = %d, %d; want %d, %d", v, n, c, inFlight, max(capacity, 0))
		}
	})
}
