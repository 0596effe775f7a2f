package protocol

import (
	"errors"
	"strconv"
)

// maxLoadDigits bounds each number of an X-Pool-Load value, so that parsing never overflows.
const maxLoadDigits = 9

var errLoadSyntax = errors.New(`want "<in_flight>/<capacity>" or "<in_flight>": decimal digits, capacity >= 1`)

// ParseLoad parses an X-Pool-Load value strictly: one or two unsigned decimal numbers of at most
// nine digits separated by "/", with no sign, space or other character; the capacity, when
// present, is at least 1. It is a pure function.
func ParseLoad(v []byte) (inFlight, capacity int64, err error) {
	i := 0
	inFlight, i, ok := loadNumber(v, i)
	if !ok {
		return 0, 0, errLoadSyntax
	}
	if i == len(v) {
		return inFlight, 0, nil
	}
	if v[i] != '/' {
		return 0, 0, errLoadSyntax
	}
	capacity, i, ok = loadNumber(v, i+1)
	if !ok || i != len(v) || capacity < 1 {
		return 0, 0, errLoadSyntax
	}
	return inFlight, capacity, nil
}

// loadNumber reads the decimal number at v[i:], returning it and the index after it.
func loadNumber(v []byte, i int) (int64, int, bool) {
	var n int64
	start := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		if i-start == maxLoadDigits {
			return 0, i, false
		}
		n = n*10 + int64(v[i]-'0')
		i++
	}
	return n, i, i > start
}

// FormatLoad is the X-Pool-Load value of a backend with inFlight requests in progress:
// "<in_flight>/<capacity>", or "<in_flight>" when capacity <= 0 (none to report). ParseLoad
// reads back what it writes for numbers of up to nine digits.
func FormatLoad(inFlight, capacity int64) string {
	n := strconv.FormatInt(inFlight, 10)
	if capacity <= 0 {
		return n
	}
	return n + "/" + strconv.FormatInt(capacity, 10)
}
