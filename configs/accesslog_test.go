package configs

import (
	"strings"
	"testing"
	"time"
)

func TestAccessLogDefaults(t *testing.T) {
	c := baseConfig(t)
	checkFields(t, []fieldCase{
		{name: "path", got: c.AccessLog.Path, want: AccessLogOff},
		{name: "format", got: c.AccessLog.Format, want: FormatJSON},
		{name: "statuses", got: len(c.AccessLog.Statuses), want: 0},
		{name: "min_duration", got: c.AccessLog.MinDuration, want: time.Duration(0)},
		{name: "sample", got: c.AccessLog.Sample, want: 1.0},
		{name: "buffer", got: c.AccessLog.Buffer, want: 262144},
		{name: "headers", got: len(c.AccessLog.Headers), want: 0},
	})
}

// TestAccessLogProblems: each access_log value is checked with its path and line; baseYAML
// ends on line 13, so the section's first key is on line 15.
func TestAccessLogProblems(t *testing.T) {
	checkProblems(t, baseYAML, []problemCase{
		{name: "stdout, combined, filters, sample and headers", doc: `access_log:
  path: "-"
  format: combined
  statuses: ["5xx", "4XX", "429", "1xx"]
  min_duration: 1.5s
  sample: 0.01
  headers: [Referer, User-Agent, X-Forwarded-For, x_custom]
`},
		{name: "a file", doc: "access_log:\n  path: /var/log/pollbal/access.log\n"},
		{name: "sample written as an integer", doc: "access_log:\n  sample: 1\n"},
		{name: "sample as a decimal without a leading zero", doc: "access_log:\n  sample: .5\n"},
		{name: "statuses written as numbers", doc: "access_log:\n  statuses: [503, 429]\n"},
		{name: "smallest and largest buffer", doc: "access_log:\n  buffer: 4096\n"},
		{name: "largest buffer", doc: "access_log:\n  buffer: 16777216\n"},

		{name: "unknown format", doc: "access_log:\n  format: xml\n",
			want: []string{`access_log.format: must be "json" or "combined" (got "xml") (line 15)`}},
		{name: "format is case-sensitive", doc: "access_log:\n  format: JSON\n",
			want: []string{`access_log.format: must be "json" or "combined" (got "JSON") (line 15)`}},
		{name: "sample zero", doc: "access_log:\n  sample: 0\n",
			want: []string{"access_log.sample: must be > 0 and <= 1 (got 0) (line 15)"}},
		{name: "sample above one", doc: "access_log:\n  sample: 1.5\n",
			want: []string{"access_log.sample: must be > 0 and <= 1 (got 1.5) (line 15)"}},
		{name: "sample negative", doc: "access_log:\n  sample: -0.1\n",
			want: []string{"access_log.sample: must be > 0 and <= 1 (got -0.1) (line 15)"}},
		{name: "sample NaN", doc: "access_log:\n  sample: .nan\n",
			want: []string{"access_log.sample: must be > 0 and <= 1 (got .nan) (line 15)"}},
		{name: "sample infinite", doc: "access_log:\n  sample: .inf\n",
			want: []string{"access_log.sample: must be > 0 and <= 1 (got .inf) (line 15)"}},
		{name: "sample as a percentage", doc: "access_log:\n  sample: 10%\n",
			want: []string{`access_log.sample: must be a number, got "10%" (line 15)`}},
		{name: "sample as a string", doc: "access_log:\n  sample: \"0.5\"\n",
			want: []string{`access_log.sample: must be a number, got "0.5" (line 15)`}},
		{name: "bad status pattern", doc: "access_log:\n  statuses: [\"5xx\", \"5x\", \"600\", \"0xx\", \"50X\", \"\"]\n",
			want: []string{
				`access_log.statuses[1]: "5x" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 15)`,
				`access_log.statuses[2]: "600" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 15)`,
				`access_log.statuses[3]: "0xx" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 15)`,
				`access_log.statuses[4]: "50X" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 15)`,
				`access_log.statuses[5]: "" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 15)`,
			}},
		{name: "status listed twice in two spellings", doc: "access_log:\n  statuses: [\"5xx\", \"503\", \"5XX\"]\n",
			want: []string{`access_log.statuses[2]: "5XX" is already listed as statuses[0] (line 15)`}},
		{name: "min_duration without statuses", doc: "access_log:\n  min_duration: 1s\n",
			want: []string{"access_log.min_duration: has no effect while statuses is empty (every request is logged); " +
				"list statuses, and min_duration adds the requests slower than it (line 15)"}},
		{name: "min_duration negative", doc: "access_log:\n  statuses: [5xx]\n  min_duration: -1s\n",
			want: []string{"access_log.min_duration: must be >= 0 (got -1s) (line 16)"}},
		{name: "min_duration not a duration", doc: "access_log:\n  min_duration: 5\n",
			want: []string{`access_log.min_duration: "5" is not a Go duration such as 500ms or 1m30s (line 15): time: missing unit in duration "5"`}},
		{name: "buffer too small", doc: "access_log:\n  buffer: 4095\n",
			want: []string{"access_log.buffer: must be >= 4096 (got 4095) (line 15)"}},
		{name: "buffer too large", doc: "access_log:\n  buffer: 16777217\n",
			want: []string{"access_log.buffer: must be <= 16777216 (got 16777217) (line 15)"}},
		{name: "secret headers in any case", doc: "access_log:\n  headers: [authorization, Proxy-Authorization, COOKIE, Set-Cookie]\n",
			want: []string{
				`access_log.headers[0]: "authorization" is never logged: it carries credentials (line 15)`,
				`access_log.headers[1]: "Proxy-Authorization" is never logged: it carries credentials (line 15)`,
				`access_log.headers[2]: "COOKIE" is never logged: it carries credentials (line 15)`,
			}},
		{name: "header name syntax", doc: "access_log:\n  headers: [\"X Forwarded\", \"X-Ok:\", \"\", \"Ünicode\"]\n",
			want: []string{
				"access_log.headers[0]: \"X Forwarded\" is not a header name (letters, digits and !#$%&'*+-.^_`|~) (line 15)",
				"access_log.headers[1]: \"X-Ok:\" is not a header name (letters, digits and !#$%&'*+-.^_`|~) (line 15)",
				"access_log.headers[2]: must not be empty (line 15)",
				"access_log.headers[3]: \"Ünicode\" is not a header name (letters, digits and !#$%&'*+-.^_`|~) (line 15)",
			}},
		{name: "the same field twice", doc: "access_log:\n  headers: [User-Agent, user-agent, User_Agent]\n",
			want: []string{
				`access_log.headers[1]: "user-agent" is written as "user_agent", like headers[0] (line 15)`,
				`access_log.headers[2]: "User_Agent" is written as "user_agent", like headers[0] (line 15)`,
			}},
		{name: "a header named like a field of the log", doc: "access_log:\n  headers: [Host, Request-Id, X-Request-Id]\n",
			want: []string{
				`access_log.headers[0]: "Host" would be written as "host", a field the access log already has (line 15)`,
				`access_log.headers[1]: "Request-Id" would be written as "request_id", a field the access log already has (line 15)`,
			}},
		{name: "a directory as path", doc: "access_log:\n  path: /var/log/pollbal/\n",
			want: []string{`access_log.path: "/var/log/pollbal/" names a directory: want a file, "-" (standard output) or "" (off) (line 15)`}},
		{name: "a NUL byte in the path", doc: "access_log:\n  path: \"a\\0b\"\n",
			want: []string{"access_log.path: must not contain a NUL byte (line 15)"}},
		{name: "unknown key", doc: "access_log:\n  rotate: daily\n",
			want: []string{`access_log.rotate: unknown key (line 15)`}},
		{name: "every problem at once", doc: "access_log:\n  format: text\n  statuses: [9xx]\n  sample: 2\n  headers: [Cookie]\n",
			want: []string{
				`access_log.format: must be "json" or "combined" (got "text") (line 15)`,
				`access_log.statuses[0]: "9xx" must be a status from 100 to 599 (503) or a class from 1xx to 5xx (line 16)`,
				"access_log.sample: must be > 0 and <= 1 (got 2) (line 17)",
				`access_log.headers[0]: "Cookie" is never logged: it carries credentials (line 18)`,
			}},
	})
}

func TestParseStatusPattern(t *testing.T) {
	tests := []struct {
		in          string
		first, last int
		ok          bool
	}{
		{in: "503", first: 503, last: 503, ok: true},
		{in: "100", first: 100, last: 100, ok: true},
		{in: "599", first: 599, last: 599, ok: true},
		{in: "5xx", first: 500, last: 599, ok: true},
		{in: "5XX", first: 500, last: 599, ok: true},
		{in: "4xX", first: 400, last: 499, ok: true},
		{in: "1xx", first: 100, last: 199, ok: true},
		{in: "099"},
		{in: "600"},
		{in: "6xx"},
		{in: "0xx"},
		{in: "5x"},
		{in: "5xxx"},
		{in: "50x"},
		{in: "x5x"},
		{in: " 503"},
		{in: "5O3"},
		{in: ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			first, last, err := ParseStatusPattern(tt.in)
			if ok := err == nil; ok != tt.ok || first != tt.first || last != tt.last {
				t.Errorf("ParseStatusPattern(%q) = %d, %d, %v; want %d, %d, ok %v", tt.in, first, last, err, tt.first, tt.last, tt.ok)
			}
		})
	}
}

// FuzzParseStatusPattern holds the parser to its grammar: an accepted entry is three bytes,
// names a range of 100 to 599 that is one status or one whole class, and spells it.
// Run it with: go test ./configs -run '^$' -fuzz FuzzParseStatusPattern -fuzztime 30s
func FuzzParseStatusPattern(f *testing.F) {
	for _, seed := range []string{"503", "5xx", "5XX", "600", "5x", "", "0xx", "1x1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, last, err := ParseStatusPattern(s)
		if err != nil {
			if first != 0 || last != 0 {
				t.Errorf("rejected %q but returned %d..%d", s, first, last)
			}
			return
		}
		if len(s) != 3 || first < 100 || last > 599 {
			t.Fatalf("accepted %q as %d..%d", s, first, last)
		}
		lower := strings.ToLower(s)
		switch {
		case first == last:
			if itoa3(first) != s {
				t.Errorf("accepted %q as the status %d", s, first)
			}
		case last == first+99 && first%100 == 0:
			if lower != itoa3(first)[:1]+"xx" {
				t.Errorf("accepted %q as the class %d..%d", s, first, last)
			}
		default:
			t.Errorf("accepted %q as %d..%d, neither a status nor a class", s, first, last)
		}
	})
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

func TestAccessLogField(t *testing.T) {
	tests := []struct{ header, want string }{
		{header: "User-Agent", want: "user_agent"},
		{header: "Referer", want: "referer"},
		{header: "X-Forwarded-For", want: "x_forwarded_for"},
		{header: "x_custom", want: "x_custom"},
	}
	for _, tt := range tests {
		if got := AccessLogField(tt.header); got != tt.want {
			t.Errorf("AccessLogField(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

// TestAccessLogFieldsReturnsACopy: the list of the log's own fields cannot be changed from
// outside the package.
func TestAccessLogFieldsReturnsACopy(t *testing.T) {
	AccessLogFields()[0] = "changed"
	if got := AccessLogFields()[0]; got != "time" {
		t.Errorf("AccessLogFields()[0] = %q after a caller changed its copy", got)
	}
}
