package accesslog

import (
	"crypto/tls"
	"strings"
	"time"
)

// start is the request start of the test records: 2 December 2026, 11:13:25.042 UTC, given
// in another zone so that the formatters must turn it into UTC.
var start = time.Date(2026, 12, 2, 12, 13, 25, 42_123_456, time.FixedZone("CET", 3600))

// proxiedRecord is a request that a backend served after a fallback and a refusal, over TLS,
// with every field set.
func proxiedRecord() *Record {
	return &Record{
		Start:          start,
		RequestID:      []byte("4bf92f3577b34da6a3ce929d0e0e4736"),
		TraceID:        []byte("0af7651916cd43dd8448eb211c80319c"),
		ClientIP:       []byte("203.0.113.7"),
		Method:         []byte("POST"),
		Host:           []byte("shop.example.com"),
		URI:            []byte("/cart/items?id=42"),
		Proto:          []byte("HTTP/1.1"),
		TLSVersion:     tls.VersionTLS13,
		SNI:            []byte("shop.example.com"),
		Status:         201,
		BytesIn:        512,
		BytesOut:       1834,
		Duration:       12_345_678 * time.Nanosecond,
		Upstream:       9_100 * time.Microsecond,
		Queue:          2_500 * time.Microsecond,
		App:            "shop",
		Service:        "web",
		Pool:           "default",
		Resolution:     "owner",
		Fallback:       true,
		Backend:        "web-3",
		BackendAddress: "10.0.0.13:8080",
		Attempts:       2,
		Refusals:       1,
		End:            EndOK,
		Referer:        []byte("https://shop.example.com/"),
		UserAgent:      []byte("Mozilla/5.0 (X11; Linux x86_64)"),
		Headers:        HeadersOf([]string{"Referer", "User-Agent", "X-Forwarded-For"}),
		HeaderValues: [][]byte{[]byte("https://shop.example.com/"), []byte("Mozilla/5.0 (X11; Linux x86_64)"),
			[]byte("198.51.100.1")},
	}
}

// refusedRecord is an answer pollbal made itself before any app matched: 404 no_app.
func refusedRecord() *Record {
	return &Record{
		Start:     start,
		RequestID: []byte("a3ce929d0e0e47364bf92f3577b34da6"),
		ClientIP:  []byte("203.0.113.7"),
		Method:    []byte("GET"),
		Host:      []byte("unknown.example.com"),
		URI:       []byte("/"),
		Proto:     []byte("HTTP/1.1"),
		Status:    404,
		BytesOut:  0,
		Duration:  80 * time.Microsecond,
		Reason:    "no_app",
		End:       EndRefused,
	}
}

// hostile holds bytes that break naive formatting: quotes, backslashes, control bytes, a
// newline, DEL, invalid and truncated UTF-8, a line separator and valid multi-byte text.
const hostile = "a\"b\\c\x00d\x1fe\nf\rg\th\x7fi\xffj\xe2\x82k\u2028l\u00e9m \x80"

// hostileRecord is proxiedRecord with hostile bytes in every field a client controls.
func hostileRecord() *Record {
	r := proxiedRecord()
	r.RequestID = []byte(hostile)
	r.Method = []byte("GE T\"")
	r.Host = []byte(hostile)
	r.URI = []byte("/" + hostile + "?" + hostile)
	r.SNI = []byte(hostile)
	r.Referer = []byte(hostile)
	r.UserAgent = []byte(hostile)
	r.HeaderValues = [][]byte{[]byte(hostile), []byte(hostile), []byte(strings.Repeat(hostile, 3))}
	return r
}
