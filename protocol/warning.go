package protocol

import (
	"bytes"
	"fmt"
	"strconv"
)

// Warning is what a POST /pool_warning body says: the group a backend is warned for, as the
// instance that sends it sees the group. A plain value; it may be copied.
type Warning struct {
	Service   string
	Version   string // "" for an unversioned group (and with warning_scope: service); "-" on the wire
	Serving   int    // the group's serving backends
	Leaving   int    // the group's leaving backends
	Threshold int    // the service's warning_threshold
	Site      string // the sending instance's site
}

// unversioned is the version field of a Warning whose Version is "".
const unversioned = "-"

// maxCountDigits bounds each count of a warning body, so that parsing never overflows.
const maxCountDigits = 9

// Line is w's body line, without the newline that ends the body:
// `<service> <version|-> serving=<n> leaving=<m> threshold=<t> site=<site>`.
func (w Warning) Line() string {
	v := w.Version
	if v == "" {
		v = unversioned
	}
	return fmt.Sprintf("%s %s serving=%d leaving=%d threshold=%d site=%s",
		w.Service, v, w.Serving, w.Leaving, w.Threshold, w.Site)
}

// Body is w's body exactly as sent (and signed): its Line and a newline.
func (w Warning) Body() string { return w.Line() + "\n" }

// ParseWarning parses a /pool_warning body strictly: the six fields of Line, each separated by
// one space, service and site in the service grammar, version in the version grammar or "-",
// counts of at most nine decimal digits as Line writes them; the newline that ends the body may
// be absent. So it accepts exactly what Body (or Line) writes for a Warning whose fields are in
// their grammars, and reads that Warning back. It is a pure function.
func ParseWarning(body []byte) (Warning, error) {
	line := bytes.TrimSuffix(body, []byte{'\n'})
	fields := bytes.Split(line, []byte{' '})
	if len(fields) != 6 {
		return Warning{}, fmt.Errorf("warning body: want 6 space-separated fields, got %d", len(fields))
	}
	var w Warning
	if !validName(fields[0], false) {
		return Warning{}, fmt.Errorf("warning body: invalid service %s", quoteBytes(fields[0]))
	}
	w.Service = string(fields[0])
	if v := fields[1]; string(v) != unversioned {
		if !validName(v, true) {
			return Warning{}, fmt.Errorf("warning body: invalid version %s", quoteBytes(v))
		}
		w.Version = string(v)
	}
	for i, f := range []struct {
		key string
		n   *int
	}{{"serving=", &w.Serving}, {"leaving=", &w.Leaving}, {"threshold=", &w.Threshold}} {
		n, ok := warningCount(fields[2+i], f.key)
		if !ok {
			return Warning{}, fmt.Errorf("warning body: field %d: want %s<count>, got %s", 3+i, f.key, quoteBytes(fields[2+i]))
		}
		*f.n = n
	}
	site, ok := bytes.CutPrefix(fields[5], []byte("site="))
	if !ok || !validName(site, false) {
		return Warning{}, fmt.Errorf("warning body: field 6: want site=<site>, got %s", quoteBytes(fields[5]))
	}
	w.Site = string(site)
	return w, nil
}

// warningCount reads "<key><count>": at most maxCountDigits decimal digits without a leading
// zero (as Line writes them), nothing else.
func warningCount(field []byte, key string) (int, bool) {
	digits, ok := bytes.CutPrefix(field, []byte(key))
	if !ok || len(digits) == 0 || len(digits) > maxCountDigits || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(digits))
	return n, err == nil
}
