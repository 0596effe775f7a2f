package accesslog

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/testproc"
)

// decodeLine decodes one JSON line with encoding/json: its fields in order, and their values.
func decodeLine(t testing.TB, line []byte) (keys []string, fields map[string]any) {
	t.Helper()
	if len(line) == 0 || line[len(line)-1] != '\n' || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line ending in a newline: %q", line)
	}
	if !json.Valid(line) {
		t.Fatalf("not valid JSON: %q", line)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line does not start an object: %v %v", tok, err)
	}
	fields = map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, dup := fields[key]; dup {
			t.Fatalf("field %q twice in %s", key, line)
		}
		keys = append(keys, key)
		fields[key] = v
	}
	return keys, fields
}

// replaceInvalid is what a JSON string of b must decode to: each byte that is not part of
// valid UTF-8 replaced by U+FFFD.
func replaceInvalid(b []byte) string { return string([]rune(string(b))) }

// TestAppendJSONRoundTrip decodes the line of a record with every field set, hostile bytes in
// every field a client controls, and compares every field with what the record holds.
func TestAppendJSONRoundTrip(t *testing.T) {
	for name, r := range map[string]*Record{"plain": proxiedRecord(), "hostile": hostileRecord()} {
		t.Run(name, func(t *testing.T) {
			keys, got := decodeLine(t, AppendJSON(nil, r))
			want := map[string]any{
				"time":            "2026-12-02T11:13:25.042Z",
				"request_id":      replaceInvalid(r.RequestID),
				"trace_id":        string(r.TraceID),
				"client_ip":       string(r.ClientIP),
				"method":          replaceInvalid(r.Method),
				"host":            replaceInvalid(r.Host),
				"uri":             replaceInvalid(r.URI),
				"proto":           "HTTP/1.1",
				"tls":             map[string]any{"version": "1.3", "sni": replaceInvalid(r.SNI)},
				"status":          json.Number("201"),
				"bytes_in":        json.Number("512"),
				"bytes_out":       json.Number("1834"),
				"duration_ms":     json.Number("12.346"),
				"upstream_ms":     json.Number("9.1"),
				"queue_ms":        json.Number("2.5"),
				"app":             "shop",
				"service":         "web",
				"pool":            "default",
				"resolution":      "owner",
				"fallback":        true,
				"backend":         "web-3",
				"backend_address": "10.0.0.13:8080",
				"attempts":        json.Number("2"),
				"refusals":        json.Number("1"),
				"end":             "ok",
				"referer":         replaceInvalid(r.HeaderValues[0]),
				"user_agent":      replaceInvalid(r.HeaderValues[1]),
				"x_forwarded_for": replaceInvalid(r.HeaderValues[2]),
			}
			for k, w := range want {
				if g, ok := got[k]; !ok {
					t.Errorf("%s: absent", k)
				} else if !jsonEqual(g, w) {
					t.Errorf("%s = %#v, want %#v", k, g, w)
				}
			}
			if len(keys) != len(want) {
				t.Errorf("fields %q, want the %d of %v", keys, len(want), want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok || bok {
		if len(am) != len(bm) {
			return false
		}
		for k := range am {
			if !jsonEqual(am[k], bm[k]) {
				return false
			}
		}
		return aok && bok
	}
	return a == b
}

// TestAppendJSONFieldOrder holds the formatter to configs' list of the log's fields (which a
// configured header may not take): a record with every field set writes exactly those, in
// that order, before its header fields.
func TestAppendJSONFieldOrder(t *testing.T) {
	r := proxiedRecord()
	r.Reason = "queue_timeout" // a proxied record has none; set it to see every field
	keys, _ := decodeLine(t, AppendJSON(nil, r))
	want := append(configs.AccessLogFields(), "referer", "user_agent", "x_forwarded_for")
	if !slices.Equal(keys, want) {
		t.Errorf("fields\n  %q\nwant\n  %q", keys, want)
	}
}

// TestAppendJSONAbsentFields: which fields a line leaves out, by the kind of request.
func TestAppendJSONAbsentFields(t *testing.T) {
	common := []string{"time", "request_id", "client_ip", "method", "host", "uri", "proto", "status",
		"bytes_in", "bytes_out", "duration_ms"}
	tests := []struct {
		name   string
		record func() *Record
		want   []string // the fields, in order
	}{
		{name: "own answer before an app matched (404 no_app)", record: refusedRecord,
			want: append(slices.Clone(common), "reason", "end")},
		{name: "own answer after scheduling, no backend tried (503 pool_exhausted)", record: func() *Record {
			r := refusedRecord()
			r.Status, r.Reason = 503, "pool_exhausted"
			r.App, r.Service, r.Pool, r.Resolution = "shop", "web", "pool-acme", "explicit"
			return r
		}, want: append(slices.Clone(common), "queue_ms", "app", "service", "pool", "resolution", "fallback",
			"attempts", "refusals", "reason", "end")},
		{name: "backend timed out before its response head", record: func() *Record {
			r := proxiedRecord()
			r.TraceID, r.TLSVersion, r.SNI, r.Upstream, r.End, r.Status = nil, 0, nil, 0, EndBackendTimeout, 504
			r.Headers, r.HeaderValues = nil, nil
			return r
		}, want: append(slices.Clone(common), "queue_ms", "app", "service", "pool", "resolution", "fallback",
			"backend", "backend_address", "attempts", "refusals", "end")},
		{name: "client gone before any status; TLS without SNI; a header the request lacks", record: func() *Record {
			r := proxiedRecord()
			r.Status, r.SNI, r.End = 0, nil, EndClientGone
			r.HeaderValues = r.HeaderValues[:1]
			r.HeaderValues = append(r.HeaderValues, nil)
			return r
		}, want: []string{"time", "request_id", "trace_id", "client_ip", "method", "host", "uri", "proto", "tls",
			"bytes_in", "bytes_out", "duration_ms", "upstream_ms", "queue_ms", "app", "service", "pool", "resolution",
			"fallback", "backend", "backend_address", "attempts", "refusals", "end", "referer"}},
		{name: "empty record", record: func() *Record { return &Record{} },
			want: []string{"bytes_in", "bytes_out", "duration_ms", "end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, fields := decodeLine(t, AppendJSON(nil, tt.record()))
			if !slices.Equal(keys, tt.want) {
				t.Errorf("fields\n  %q\nwant\n  %q", keys, tt.want)
			}
			if _, ok := fields["attempts"]; ok && fields["attempts"] == json.Number("0") {
				if fields["refusals"] != json.Number("0") || fields["fallback"] != false {
					t.Errorf("with no backend tried, refusals %v and fallback %v, want 0 and false", fields["refusals"], fields["fallback"])
				}
			}
			if _, ok := fields["tls"]; ok {
				if tls := fields["tls"].(map[string]any); tls["version"] != "1.3" || len(tls) != 1 {
					t.Errorf("tls = %v, want only the version 1.3", tls)
				}
			}
		})
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "shop.example.com", want: `"shop.example.com"`},
		{name: "empty", in: "", want: `""`},
		{name: "quote and backslash", in: `a"b\c`, want: `"a\"b\\c"`},
		{name: "named control bytes", in: "\n\r\t", want: `"\n\r\t"`},
		{name: "other control bytes", in: "\x00\x01\x08\x0c\x1f", want: `"\u0000\u0001\u0008\u000c\u001f"`},
		{name: "DEL and HTML characters are valid JSON", in: "\x7f<>&", want: "\"\x7f<>&\""},
		{name: "valid UTF-8", in: "café 日本", want: `"café 日本"`},
		{name: "invalid byte", in: "a\xffb", want: `"a\ufffdb"`},
		{name: "each invalid byte", in: "\xff\xfe", want: `"\ufffd\ufffd"`},
		{name: "truncated sequence at the end", in: "a\xe2\x82", want: `"a\ufffd\ufffd"`},
		{name: "surrogate half", in: "\xed\xa0\x80", want: `"\ufffd\ufffd\ufffd"`},
		{name: "line and paragraph separators", in: "a\u2028b\u2029", want: `"a\u2028b\u2029"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendJSONString(nil, tt.in)); got != tt.want {
				t.Errorf("string: got %s, want %s", got, tt.want)
			}
			if got := string(appendJSONString(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("bytes: got %s, want %s", got, tt.want)
			}
			var back string
			if err := json.Unmarshal([]byte(tt.want), &back); err != nil || back != replaceInvalid([]byte(tt.in)) {
				t.Errorf("%s decodes to %q (%v), want %q", tt.want, back, err, replaceInvalid([]byte(tt.in)))
			}
		})
	}
}

func TestAppendMillis(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{d: 0, want: "0"},
		{d: -time.Second, want: "0"},
		{d: 400 * time.Nanosecond, want: "0"},
		{d: 500 * time.Nanosecond, want: "0.001"},
		{d: 42 * time.Microsecond, want: "0.042"},
		{d: 1500 * time.Microsecond, want: "1.5"},
		{d: 12_345_678 * time.Nanosecond, want: "12.346"},
		{d: 2 * time.Second, want: "2000"},
		{d: 90 * time.Minute, want: "5400000"},
	}
	for _, tt := range tests {
		if got := string(appendMillis(nil, tt.d)); got != tt.want {
			t.Errorf("appendMillis(%v) = %s, want %s", tt.d, got, tt.want)
		}
	}
}

func TestAppendTLSVersion(t *testing.T) {
	for v, want := range map[uint16]string{0x0301: "1.0", 0x0302: "1.1", 0x0303: "1.2", 0x0304: "1.3", 0x0300: "0x0300", 0xfeff: "0xfeff"} {
		if got := string(appendTLSVersion(nil, v)); got != want {
			t.Errorf("appendTLSVersion(%#x) = %s, want %s", v, got, want)
		}
	}
}

// TestURICut: a line holds the first 2,048 bytes of the path and query, in both formats.
func TestURICut(t *testing.T) {
	r := proxiedRecord()
	uri := "/" + strings.Repeat("abcdefgh", 400) // 3,201 bytes
	r.URI = []byte(uri)
	_, fields := decodeLine(t, AppendJSON(nil, r))
	if got := fields["uri"]; got != uri[:MaxURI] {
		t.Errorf("JSON uri has %d bytes, want the first %d", len(got.(string)), MaxURI)
	}
	m := combinedRe.FindStringSubmatch(string(AppendCombined(nil, r)))
	if m == nil {
		t.Fatal("combined line does not match")
	}
	if want := "POST " + uri[:MaxURI] + " HTTP/1.1"; m[4] != want {
		t.Errorf("combined request has %d bytes, want %d", len(m[4]), len(want))
	}
}

// combinedRe is NGINX's combined format, as log parsers read it (GoAccess' and Logstash's
// COMBINEDAPACHELOG take the same shape), followed by pollbal's key=value fields.
var combinedRe = regexp.MustCompile(`^(\S+) - (\S+) \[(\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] ` +
	`"((?:[^"\\]|\\.)*)" (\d{3}) (\d+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"` +
	` rid=(\S+) app=(\S+) pool=(\S+) backend=(\S+) attempts=(\d+) queue_ms=(\d+(?:\.\d+)?) duration_ms=(\d+(?:\.\d+)?)` +
	` end=(ok|client_gone|client_timeout|backend_timeout|backend_error|refused|upgrade_closed)\n$`)

func TestAppendCombined(t *testing.T) {
	tests := []struct {
		name   string
		record func() *Record
		want   []string // the regexp's groups
	}{
		{name: "proxied", record: proxiedRecord, want: []string{"203.0.113.7", "-", "02/Dec/2026:11:13:25 +0000",
			"POST /cart/items?id=42 HTTP/1.1", "201", "1834", "https://shop.example.com/", "Mozilla/5.0 (X11; Linux x86_64)",
			"4bf92f3577b34da6a3ce929d0e0e4736", "shop", "default", "web-3", "2", "2.5", "12.346", "ok"}},
		{name: "own answer: empty values are -, nothing queued is 0", record: refusedRecord, want: []string{"203.0.113.7", "-",
			"02/Dec/2026:11:13:25 +0000", "GET / HTTP/1.1", "404", "0", "-", "-",
			"a3ce929d0e0e47364bf92f3577b34da6", "-", "-", "-", "0", "0", "0.08", "refused"}},
		{name: "hostile bytes are escaped as NGINX does", record: hostileRecord, want: []string{"203.0.113.7", "-",
			"02/Dec/2026:11:13:25 +0000",
			`GE T\x22 /a\x22b\x5Cc\x00d\x1Fe\x0Af\x0Dg\x09h\x7Fi\xFFj\xE2\x82k\xE2\x80\xA8l\xC3\xA9m \x80?a\x22b\x5Cc\x00d\x1Fe\x0Af\x0Dg\x09h\x7Fi\xFFj\xE2\x82k\xE2\x80\xA8l\xC3\xA9m \x80 HTTP/1.1`,
			"201", "1834",
			`a\x22b\x5Cc\x00d\x1Fe\x0Af\x0Dg\x09h\x7Fi\xFFj\xE2\x82k\xE2\x80\xA8l\xC3\xA9m \x80`,
			`a\x22b\x5Cc\x00d\x1Fe\x0Af\x0Dg\x09h\x7Fi\xFFj\xE2\x82k\xE2\x80\xA8l\xC3\xA9m \x80`,
			`a\x22b\x5Cc\x00d\x1Fe\x0Af\x0Dg\x09h\x7Fi\xFFj\xE2\x82k\xE2\x80\xA8l\xC3\xA9m\x20\x80`,
			"shop", "default", "web-3", "2", "2.5", "12.346", "ok"}},
		{name: "no status sent, no request line", record: func() *Record {
			return &Record{Start: start, ClientIP: []byte("::1"), End: EndClientTimeout, Duration: time.Minute}
		}, want: []string{"::1", "-", "02/Dec/2026:11:13:25 +0000", "-", "000", "0", "-", "-", "-", "-", "-", "-", "0", "0", "60000", "client_timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := string(AppendCombined(nil, tt.record()))
			m := combinedRe.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("line does not match NGINX's combined format:\n%q", line)
			}
			if got := m[1:]; !slices.Equal(got, tt.want) {
				t.Errorf("fields\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

// TestHexEscapesUpperCase: NGINX writes \xHH with upper-case digits; so must we, or a reader
// built for NGINX logs would see a different byte sequence.
func TestHexEscapesUpperCase(t *testing.T) {
	if got := string(appendCombinedField(nil, []byte{0xab, '"'}, false)); got != `\xAB\x22` {
		t.Errorf("got %s, want \\xAB\\x22", got)
	}
}

// FuzzAppendJSON: whatever bytes a client sends in the fields it controls, the line is one
// line of valid JSON whose strings decode to those bytes (invalid UTF-8 as U+FFFD, the URI cut).
// Run it with: go test ./internal/accesslog -run '^$' -fuzz FuzzAppendJSON -fuzztime 30s
func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte("/"), []byte("shop.example.com"), []byte("Mozilla/5.0"), "shop")
	f.Add([]byte(hostile), []byte(hostile), []byte(hostile), "a\"b")
	f.Add([]byte(strings.Repeat("\xe2\x82\xac", 700)), []byte{0}, []byte{0xff}, "\xff")
	f.Fuzz(func(t *testing.T, uri, host, header []byte, app string) {
		r := proxiedRecord()
		r.URI, r.Host, r.HeaderValues[1], r.App = uri, host, header, app
		_, fields := decodeLine(t, AppendJSON(nil, r))
		check := func(name string, want []byte) {
			if len(want) == 0 {
				if _, ok := fields[name]; ok {
					t.Errorf("%s present for an empty value", name)
				}
				return
			}
			if got := fields[name]; got != replaceInvalid(want) {
				t.Errorf("%s = %q, want %q", name, got, replaceInvalid(want))
			}
		}
		check("uri", cutURI(uri))
		check("host", host)
		check("user_agent", header)
		check("app", []byte(app))
	})
}

// FuzzAppendCombined: whatever bytes a client sends, the combined line matches NGINX's format
// with pollbal's fields after it, and holds only printable ASCII.
// Run it with: go test ./internal/accesslog -run '^$' -fuzz FuzzAppendCombined -fuzztime 30s
func FuzzAppendCombined(f *testing.F) {
	f.Add([]byte("GET"), []byte("/"), []byte("Mozilla/5.0"), []byte("abc"))
	f.Add([]byte("G\"T"), []byte(hostile), []byte(hostile), []byte(hostile))
	f.Add([]byte{}, []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, method, uri, agent, rid []byte) {
		r := proxiedRecord()
		r.Method, r.URI, r.UserAgent, r.RequestID = method, uri, agent, rid
		line := AppendCombined(nil, r)
		for i, c := range line[:len(line)-1] {
			if c < 0x20 || c > 0x7e {
				t.Fatalf("byte %#x at %d in %q", c, i, line)
			}
		}
		m := combinedRe.FindSubmatch(line)
		if m == nil {
			t.Fatalf("line does not match NGINX's combined format:\n%q", line)
		}
		if got, want := unescapeNginx(m[8]), orDash(agent); !bytes.Equal(got, want) {
			t.Errorf("user agent %q reads back as %q", agent, got)
		}
		if got, want := unescapeNginx(m[9]), orDash(rid); !bytes.Equal(got, want) {
			t.Errorf("rid %q reads back as %q", rid, got)
		}
	})
}

func orDash(b []byte) []byte {
	if len(b) == 0 {
		return []byte("-")
	}
	return b
}

// unescapeNginx undoes NGINX's \xHH escapes.
func unescapeNginx(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			if v, err := strconv.ParseUint(string(b[i+2:i+4]), 16, 8); err == nil {
				out = append(out, byte(v))
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return out
}

// TestFormatAllocs: formatting a record, hostile bytes included, allocates nothing once the
// destination has room.
func TestFormatAllocs(t *testing.T) {
	if testproc.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for name, r := range map[string]*Record{"proxied": proxiedRecord(), "hostile": hostileRecord(), "refused": refusedRecord()} {
		dst := make([]byte, 0, 64<<10)
		if n := testing.AllocsPerRun(1000, func() { dst = AppendJSON(dst[:0], r) }); n != 0 {
			t.Errorf("AppendJSON(%s): %v allocations per line", name, n)
		}
		if n := testing.AllocsPerRun(1000, func() { dst = AppendCombined(dst[:0], r) }); n != 0 {
			t.Errorf("AppendCombined(%s): %v allocations per line", name, n)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := proxiedRecord()
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendJSON(dst[:0], r)
	}
}

func BenchmarkAppendCombined(b *testing.B) {
	r := proxiedRecord()
	dst := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendCombined(dst[:0], r)
	}
}
