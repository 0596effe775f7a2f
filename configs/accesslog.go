package configs

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// AccessLog configures the access log: one line per request, written when the request ends.
type AccessLog struct {
	// Path is where lines go: AccessLogOff (""), AccessLogStdout ("-") or a file, appended to.
	Path string `yaml:"path"`
	// Format is FormatJSON or FormatCombined.
	Format string `yaml:"format"`
	// Statuses, when not empty, limits the log to these statuses: each entry a status (503) or
	// a class (5xx), in any case; see ParseStatusPattern.
	Statuses []string `yaml:"statuses"`
	// MinDuration, with Statuses, adds the requests slower than it whatever their status.
	MinDuration time.Duration `yaml:"min_duration"`
	// Sample is the fraction (0 < s <= 1) of the requests that pass the filters that is logged.
	Sample float64 `yaml:"sample"`
	// Buffer is how many bytes are gathered before a write.
	Buffer int `yaml:"buffer"`
	// Headers are request headers written as fields of their own (see AccessLogField).
	Headers []string `yaml:"headers"`
}

// AccessLog.Path values with a meaning of their own, and AccessLog.Format's words.
const (
	AccessLogOff    = ""
	AccessLogStdout = "-"

	FormatJSON     = "json"
	FormatCombined = "combined"
)

// Bounds of access_log.buffer. Up to 16 buffers of lines may wait for a slow disk, so the upper
// bound caps that memory too.
const (
	MinAccessLogBuffer = 4 << 10
	MaxAccessLogBuffer = 16 << 20
)

// accessLogFields are the fields every access log line may carry, in the order the JSON format
// writes them; a configured header may not take one of their names. The accesslog package's
// tests hold its formatter to this list.
var accessLogFields = []string{
	"time", "request_id", "trace_id", "client_ip", "method", "host", "uri", "proto", "tls",
	"status", "bytes_in", "bytes_out", "duration_ms", "upstream_ms", "queue_ms", "app",
	"service", "pool", "resolution", "fallback", "backend", "backend_address", "attempts",
	"refusals", "reason", "end",
}

// AccessLogFields returns the names of the access log's own fields, in the order the JSON
// format writes them. The slice is new on every call.
func AccessLogFields() []string { return append([]string(nil), accessLogFields...) }

// AccessLogField is the field a logged request header is written as: its name in lower case,
// each "-" turned into "_" (User-Agent: user_agent).
func AccessLogField(header string) string {
	return strings.ReplaceAll(strings.ToLower(header), "-", "_")
}

// secretHeaders carry credentials; an access log never holds them (lower case).
var secretHeaders = []string{"authorization", "proxy-authorization", "cookie"}

// ParseStatusPattern reads an access_log.statuses entry: a status from 100 to 599 ("503") or a
// class from 1xx to 5xx ("5xx", in any case). It returns the first and last status it matches.
func ParseStatusPattern(s string) (first, last int, err error) {
	if len(s) == 3 && s[0] >= '1' && s[0] <= '5' {
		class := int(s[0]-'0') * 100
		switch {
		case isDigit(s[1]) && isDigit(s[2]):
			n := class + int(s[1]-'0')*10 + int(s[2]-'0')
			return n, n, nil
		case (s[1] == 'x' || s[1] == 'X') && (s[2] == 'x' || s[2] == 'X'):
			return class, class + 99, nil
		}
	}
	return 0, 0, fmt.Errorf("%q must be a status from 100 to 599 (503) or a class from 1xx to 5xx", s)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// validateAccessLog checks the access_log section. Whether the file can be opened is checked
// where it is opened.
func (c *Config) validateAccessLog(p *problemList) {
	a := &c.AccessLog
	const path = "access_log"
	switch {
	case strings.ContainsRune(a.Path, 0):
		p.add(path+".path", "must not contain a NUL byte")
	case strings.HasSuffix(a.Path, "/"):
		p.add(path+".path", "%q names a directory: want a file, \"-\" (standard output) or \"\" (off)", a.Path)
	}
	oneOf(p, path+".format", a.Format, FormatJSON, FormatCombined)

	seen := make(map[[2]int]int, len(a.Statuses))
	for i, s := range a.Statuses {
		spath := fmt.Sprintf("%s.statuses[%d]", path, i)
		first, last, err := ParseStatusPattern(s)
		if err != nil {
			p.wrap(spath, err)
			continue
		}
		if j, dup := seen[[2]int{first, last}]; dup {
			p.add(spath, "%q is already listed as statuses[%d]", s, j)
			continue
		}
		seen[[2]int{first, last}] = i
	}
	switch {
	case a.MinDuration < 0:
		p.add(path+".min_duration", "must be >= 0 (got %s)", a.MinDuration)
	case a.MinDuration > 0 && len(a.Statuses) == 0:
		// Every request is logged already: the operator most likely meant "only the slow ones".
		p.add(path+".min_duration", "has no effect while statuses is empty (every request is logged); "+
			"list statuses, and min_duration adds the requests slower than it")
	}
	// Written so that NaN fails too.
	if !(a.Sample > 0 && a.Sample <= 1) {
		p.add(path+".sample", "must be > 0 and <= 1 (got %s)", formatSample(a.Sample))
	}
	atLeast(p, path+".buffer", a.Buffer, MinAccessLogBuffer)
	atMost(p, path+".buffer", a.Buffer, MaxAccessLogBuffer)
	c.validateAccessLogHeaders(p, path+".headers")
}

// validateAccessLogHeaders checks the logged request headers: each a header name, none that
// carries credentials, and no two written as the same field or as one of the log's own.
func (c *Config) validateAccessLogHeaders(p *problemList, path string) {
	fields := make(map[string]int, len(c.AccessLog.Headers))
	for i, h := range c.AccessLog.Headers {
		hpath := fmt.Sprintf("%s[%d]", path, i)
		field := AccessLogField(h)
		switch j, dup := fields[field]; {
		case h == "":
			p.add(hpath, "must not be empty")
		case !validHeaderName(h):
			p.add(hpath, "%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
		case isSecretHeader(h):
			p.add(hpath, "%q is never logged: it carries credentials", h)
		case isAccessLogField(field):
			p.add(hpath, "%q would be written as %q, a field the access log already has", h, field)
		case dup:
			p.add(hpath, "%q is written as %q, like headers[%d]", h, field, j)
		default:
			fields[field] = i
		}
	}
}

func isSecretHeader(h string) bool {
	return slices.ContainsFunc(secretHeaders, func(s string) bool { return strings.EqualFold(h, s) })
}

func isAccessLogField(name string) bool { return slices.Contains(accessLogFields, name) }

// validHeaderName reports whether s is an HTTP field name: one or more token characters.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', isDigit(b):
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// formatSample writes a sample for a message; %v would print NaN and infinities as Go does.
func formatSample(s float64) string {
	switch {
	case math.IsNaN(s):
		return ".nan"
	case math.IsInf(s, 1):
		return ".inf"
	case math.IsInf(s, -1):
		return "-.inf"
	}
	return fmt.Sprint(s)
}
