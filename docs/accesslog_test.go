package docs

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	"pollbal/internal/accesslog"
	"pollbal/internal/markdown"
)

// accessLogExamples are the requests whose lines access-log.md shows: one served from the
// default pool after its own pool's backend refused it, and one pollbal answered itself after
// it waited in the queue.
func accessLogExamples() (served, queued *accesslog.Record) {
	start := time.Date(2026, 12, 2, 11, 13, 25, 42_000_000, time.UTC)
	headers := accesslog.HeadersOf([]string{"Referer", "User-Agent"})
	served = &accesslog.Record{
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
		Duration:       14_250 * time.Microsecond,
		Upstream:       9_100 * time.Microsecond,
		Queue:          0,
		App:            "shop",
		Service:        "web",
		Pool:           "default",
		Resolution:     "owner",
		Fallback:       true,
		Backend:        "web-4",
		BackendAddress: "10.0.0.14:8080",
		Attempts:       2,
		Refusals:       1,
		End:            accesslog.EndOK,
		Referer:        []byte("https://shop.example.com/cart"),
		UserAgent:      []byte("Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"),
		Headers:        headers,
	}
	served.HeaderValues = [][]byte{served.Referer, served.UserAgent}
	queued = &accesslog.Record{
		Start:      start.Add(2 * time.Second),
		RequestID:  []byte("c0ffee00c0ffee00c0ffee00c0ffee00"),
		ClientIP:   []byte("198.51.100.23"),
		Method:     []byte("GET"),
		Host:       []byte("api.example.com"),
		URI:        []byte("/v1/orders"),
		Proto:      []byte("HTTP/1.1"),
		Status:     503,
		BytesOut:   int64(len("no backend slot freed in time: app api, service api, pool pool-acme\n")),
		Duration:   2_000_420 * time.Microsecond,
		Queue:      2 * time.Second,
		App:        "api",
		Service:    "api",
		Pool:       "pool-acme",
		Resolution: "explicit",
		Reason:     "queue_timeout",
		End:        accesslog.EndRefused,
		Headers:    headers,
	}
	queued.HeaderValues = [][]byte{nil, []byte("curl/8.14.1")}
	return served, queued
}

// TestAccessLogExamples keeps access-log.md's example lines what pollbal writes: its json
// blocks are the JSON lines of the two example requests, its text block the combined line of
// the first.
func TestAccessLogExamples(t *testing.T) {
	doc := read(t, "access-log.md")
	served, queued := accessLogExamples()
	wantJSON := []string{string(accesslog.AppendJSON(nil, served)), string(accesslog.AppendJSON(nil, queued))}
	if got := markdown.FencedBlocks(doc, "json"); !slices.Equal(got, wantJSON) {
		t.Errorf("docs/access-log.md's json blocks are\n%s\npollbal writes\n%s", strings.Join(got, ""), strings.Join(wantJSON, ""))
	}
	wantCombined := []string{string(accesslog.AppendCombined(nil, served))}
	if got := markdown.FencedBlocks(doc, "text"); !slices.Equal(got, wantCombined) {
		t.Errorf("docs/access-log.md's text blocks are\n%s\npollbal writes\n%s", strings.Join(got, ""), strings.Join(wantCombined, ""))
	}
}
