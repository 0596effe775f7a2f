package protocol

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// MaxPoolLines is the most lines a /pool answer may have. Every line counts, blank and comment
// lines included, so that the work spent on an answer is bounded by its line count alone; the
// newline that ends the last line does not start another one.
const MaxPoolLines = 64

// The grammars of a service and of a version, as regular expressions without anchors. The
// parser checks them by hand (validName; the tests hold it to these); configs validates the
// names it declares with them.
const (
	ServiceGrammar = `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`
	VersionGrammar = `[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}`
)

// maxTokenLen is the longest service or version: one leading character plus {0,63}.
const maxTokenLen = 64

// PoolError is why a /pool answer was rejected. Line is the 1-based line at fault, or 0 when
// the answer as a whole is at fault (too long). A plain value; it may be copied.
type PoolError struct {
	Line int
	Msg  string
}

func (e *PoolError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// ParsePool parses a /pool answer (docs/protocol.md). It is all or nothing: one bad line rejects
// the whole answer with a *PoolError naming the line. An empty answer (or one with only blank and
// comment lines) yields an empty, non-nil slice: the backend is ready and serves nothing.
// maxBody <= 0 means no size limit. ParsePool is a pure function, safe for concurrent use; the
// returned strings do not alias body.
func ParsePool(body []byte, maxBody int) ([]Report, error) {
	if maxBody > 0 && len(body) > maxBody {
		return nil, &PoolError{Msg: fmt.Sprintf("body over %d bytes", maxBody)}
	}
	reports := make([]Report, 0, countReports(body))
	for n := 1; len(body) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if n > MaxPoolLines {
			return nil, &PoolError{Line: n, Msg: fmt.Sprintf("more than %d lines", MaxPoolLines)}
		}
		r, ok, err := parseLine(line)
		if err != nil {
			return nil, &PoolError{Line: n, Msg: err.Error()}
		}
		if !ok {
			continue
		}
		for i := range reports {
			if reports[i].Service == r.Service {
				return nil, &PoolError{Line: n, Msg: fmt.Sprintf("duplicate service %s", quote(r.Service))}
			}
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// countReports is an upper bound on the number of reports in body, so that ParsePool allocates once.
func countReports(body []byte) int {
	return min(bytes.Count(body, []byte{'\n'})+1, MaxPoolLines)
}

// parseLine parses one line; ok is false for a blank or comment line.
func parseLine(line []byte) (r Report, ok bool, err error) {
	if !utf8.Valid(line) {
		return Report{}, false, fmt.Errorf("invalid UTF-8")
	}
	var tokens [3][]byte
	n := 0
	for rest := line; ; {
		tok, next := nextToken(rest)
		if tok == nil {
			break
		}
		if n == 0 && tok[0] == '#' {
			return Report{}, false, nil
		}
		if n == len(tokens) {
			return Report{}, false, fmt.Errorf("more than %d fields", len(tokens))
		}
		tokens[n] = tok
		n++
		rest = next
	}
	if n == 0 {
		return Report{}, false, nil
	}
	if !validName(tokens[0], false) {
		return Report{}, false, fmt.Errorf("invalid service %s", quoteBytes(tokens[0]))
	}
	r = Report{Service: string(tokens[0]), Status: Serving}
	if n >= 2 {
		switch string(tokens[1]) {
		case "serving", "ok":
			r.Status = Serving
		case "leaving":
			r.Status = Leaving
		default:
			return Report{}, false, fmt.Errorf("unknown status %s", quoteBytes(tokens[1]))
		}
	}
	if n == 3 {
		if !validName(tokens[2], true) {
			return Report{}, false, fmt.Errorf("invalid version %s", quoteBytes(tokens[2]))
		}
		r.Version = string(tokens[2])
	}
	return r, true, nil
}

// nextToken returns the first whitespace-separated token of s and what follows it; tok is nil
// when s holds only whitespace. A trailing '\r' (CRLF) is whitespace like any other.
func nextToken(s []byte) (tok, rest []byte) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return nil, nil
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// validName reports whether b matches ServiceGrammar or, with plus, VersionGrammar.
// Hand-written to keep regexp off the polling hot path; the tests check it against the regexps.
func validName(b []byte, plus bool) bool {
	if len(b) == 0 || len(b) > maxTokenLen || !isAlnum(b[0]) {
		return false
	}
	for _, c := range b[1:] {
		if !isAlnum(c) && c != '_' && c != '.' && c != '-' && (!plus || c != '+') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// quoteBytes quotes a token for an error message, cut short so that a hostile answer cannot
// fill logs and the state API.
func quoteBytes(b []byte) string {
	const limit = maxTokenLen + 8
	if len(b) > limit {
		return fmt.Sprintf("%q...", b[:limit])
	}
	return fmt.Sprintf("%q", b)
}

func quote(s string) string { return quoteBytes([]byte(s)) }

// FormatPool writes reports in canonical form, one "<service> <status>[ <version>]" line each,
// so that ParsePool(FormatPool(r)) returns r for every r that ParsePool returned.
func FormatPool(reports []Report) []byte {
	var b []byte
	for _, r := range reports {
		b = append(b, r.Service...)
		if r.Status != "" || r.Version != "" {
			b = append(b, ' ')
			b = append(b, r.Status...)
		}
		if r.Version != "" {
			b = append(b, ' ')
			b = append(b, r.Version...)
		}
		b = append(b, '\n')
	}
	return b
}
