package main

// End-to-end: HTTP/2 to clients. Go's own HTTP/2 client talks to the real binary over TLS
// (ALPN h2) and with prior knowledge on the plain listener (h2c); every stream goes through the
// one request path: routing by :authority, a lease per stream against capacity, the queue,
// bodies streamed both ways with bounded memory. Hand-written clients (x/net/http2's Framer)
// reset streams as fast as they open them and flood a header block with CONTINUATION frames;
// both are cut off and counted, and leave no lease behind.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"pollbal/internal/certs/certstest"
	"pollbal/internal/testproc"
)

// h2Setup is pollbal with a TLS listener (h2 by ALPN) and h2c on its plain listener, in front
// of two backends: acme-1 (pool-acme, capacity 2) serves app shop (shop.test), def-1 (the
// default pool, capacity 100) serves every other host; requests queue up to 10 s.
type h2Setup struct {
	pb           *instance
	acme, def    *backend
	tlsAddr      string
	pair         certstest.Pair
	tlsC, clearC *http.Client
	accessLog    string
}

func startH2Setup(t *testing.T) *h2Setup {
	t.Helper()
	s := &h2Setup{tlsAddr: testproc.FreeAddr(t), accessLog: filepath.Join(t.TempDir(), "access.log")}
	s.pair = certstest.Write(t, t.TempDir(), "h2", certstest.Options{}, "shop.test", "other.test")
	s.acme = startBackend(t, "acme-1", "127.0.0.1:0", "web serving v1\n")
	s.def = startBackend(t, "def-1", "127.0.0.1:0", "web serving v1\n")
	cfg := fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN}
poll: {interval: 500ms, timeout: 450ms}
proxy: {queue_timeout: 10s, max_queue: 100, max_request_body: 100000000}
http2: {h2c: true}
access_log: {path: %s}
services: {web: {}}
apps:
  - {name: shop, hosts: ["shop.test"], pool: pool-acme}
  - {name: www, hosts: ["*"]}
backends:
  - {id: acme-1, address: %s, capacity: 2, owner: acme}
  - {id: def-1, address: %s, capacity: 100}
tls:
  listen: %s
  certificates: [{cert_file: %s, key_file: %s}]
`, s.accessLog, s.acme.addr, s.def.addr, s.tlsAddr, s.pair.CertFile, s.pair.KeyFile)
	s.pb = startPollbal(t, cfg)
	testproc.WaitFor(t, 10*time.Second, "backends ready", func() bool {
		st := s.pb.state(t)
		a, _, _, _ := st.backend("acme-1")
		d, _, _, _ := st.backend("def-1")
		return a && d
	})
	roots := certstest.Pool(s.pair)
	tlsAddr := s.tlsAddr
	h2only := func() *http.Protocols {
		var p http.Protocols
		p.SetHTTP2(true)
		return &p
	}
	s.tlsC = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Protocols:       h2only(),
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"h2"}}}
			return d.DialContext(ctx, network, tlsAddr) // every host is pollbal's TLS listener
		},
	}}
	plain := s.pb.listen
	var clear http.Protocols
	clear.SetUnencryptedHTTP2(true) // prior knowledge: HTTP/2 without TLS
	s.clearC = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Protocols: &clear,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, plain)
		},
	}}
	return s
}

// inFlight is a backend's in_flight (leases held) in /api/state.
func (s *h2Setup) inFlight(t *testing.T, id string) int {
	t.Helper()
	var st struct {
		Backends []struct {
			ID       string `json:"id"`
			InFlight int    `json:"in_flight"`
		} `json:"backends"`
	}
	getJSON(t, "http://"+s.pb.admin+"/api/state", &st)
	for _, b := range st.Backends {
		if b.ID == id {
			return b.InFlight
		}
	}
	t.Fatalf("%s missing from /api/state", id)
	return 0
}

// metric is the value of one sample line of pollbal's /metrics (name with its labels), 0
// when absent.
func (s *h2Setup) metric(t *testing.T, sample string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`)
	m := re.FindStringSubmatch(s.pb.metrics(t))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func h2Get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, string(body)
}

// TestEndToEndHTTP2 covers what a well-behaved HTTP/2 client sees.
func TestEndToEndHTTP2(t *testing.T) {
	s := startH2Setup(t)

	t.Run("ALPN h2 and h2c route by :authority", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			c      *http.Client
			scheme string
		}{{"tls", s.tlsC, "https"}, {"h2c", s.clearC, "http"}} {
			for host, want := range map[string]string{"shop.test": "acme-1", "other.test": "def-1"} {
				resp, _ := h2Get(t, tc.c, tc.scheme+"://"+host+"/")
				if resp.ProtoMajor != 2 || resp.StatusCode != 200 || resp.Header.Get("X-Pollbal-Backend") != want {
					t.Errorf("%s %s: %s %d backend %q, want HTTP/2 200 from %s", tc.name, host, resp.Proto, resp.StatusCode,
						resp.Header.Get("X-Pollbal-Backend"), want)
				}
				if resp.Header.Get("X-Request-Id") == "" {
					t.Errorf("%s %s: no X-Request-Id", tc.name, host)
				}
				if got := resp.Header.Get("X-Backend-Forwarded-Proto"); got != tc.scheme {
					t.Errorf("%s %s: X-Forwarded-Proto %q, want %s", tc.name, host, got, tc.scheme)
				}
			}
		}
		resp, _ := h2Get(t, s.tlsC, "https://other.test/_backend/headers?logged")
		if got := resp.Header.Get("X-Pollbal-Pool"); got != "default" {
			t.Errorf("X-Pollbal-Pool %q, want default", got)
		}
		var line string
		testproc.WaitFor(t, 5*time.Second, "the stream in the access log", func() bool {
			b, _ := os.ReadFile(s.accessLog)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "?logged") {
					line = l
					return true
				}
			}
			return false
		})
		for _, want := range []string{`"proto":"HTTP/2.0"`, `"host":"other.test"`, `"backend":"def-1"`, `"status":200`, `"sni":"other.test"`} {
			if !strings.Contains(line, want) {
				t.Errorf("access log line lacks %s: %s", want, line)
			}
		}
	})

	t.Run("HTTP/1.1 on the h2c listener is served as before", func(t *testing.T) {
		resp, err := http.Get("http://" + s.pb.listen + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 1 || resp.StatusCode != 200 || resp.Header.Get("X-Backend-Forwarded-Proto") != "http" {
			t.Errorf("%s %d, X-Forwarded-Proto %q; want HTTP/1.1 200, http", resp.Proto, resp.StatusCode,
				resp.Header.Get("X-Backend-Forwarded-Proto"))
		}
		for _, post := range []string{"POST", "PUT", "PATCH"} { // methods that start like the preface
			req, _ := http.NewRequest(post, "http://"+s.pb.listen+"/upload", strings.NewReader("body"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", post, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s /upload: %d", post, resp.StatusCode)
			}
		}
	})

	t.Run("Upgrade h2c is still 501", func(t *testing.T) {
		conn, err := net.Dial("tcp", s.pb.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 501 || resp.Header.Get("X-Pollbal-Reason") != "upgrade_unsupported" {
			t.Errorf("Upgrade: h2c answered %d %q, want 501 upgrade_unsupported", resp.StatusCode, resp.Header.Get("X-Pollbal-Reason"))
		}
	})

	t.Run("streams hold one lease each against capacity, and queue", func(t *testing.T) {
		const streams = 5 // acme-1 has capacity 2: 2 at the backend, 3 queued
		codes := make(chan int, streams)
		for range streams {
			go func() {
				resp, err := s.tlsC.Get("https://shop.test/hold")
				if err != nil {
					t.Error(err)
					codes <- 0
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
		}
		testproc.WaitFor(t, 10*time.Second, "2 leases held, 5 streams open", func() bool {
			return s.inFlight(t, "acme-1") == 2 && s.metric(t, `pollbal_client_streams{proto="h2"}`) == streams
		})
		if q := s.metric(t, `pollbal_queue_length{pool="pool-acme",service="web"}`); q != streams-2 {
			t.Errorf("queue_length %v, want %d", q, streams-2)
		}
		got := 0
		for got < streams {
			release(t, s.acme)
			select {
			case code := <-codes:
				got++
				if code != 200 {
					t.Errorf("stream answered %d, want 200", code)
				}
			case <-time.After(100 * time.Millisecond):
			}
		}
		if peak := s.acme.stats(t).LoadPeak; peak > 2 {
			t.Errorf("acme-1 saw %d requests at once, capacity 2", peak)
		}
		testproc.WaitFor(t, 5*time.Second, "leases and streams back to 0", func() bool {
			return s.inFlight(t, "acme-1") == 0 && s.metric(t, `pollbal_client_streams{proto="h2"}`) == 0
		})
	})

	t.Run("60 MiB each way streams with bounded memory", func(t *testing.T) {
		const size = 60 * mib
		rss0, _ := (&streamSetup{pb: s.pb}).memory(t)
		req, err := http.NewRequest(http.MethodPost, "https://other.test/upload", io.LimitReader(zeros{}, size))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		resp, err := s.tlsC.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("upload answered %d", resp.StatusCode)
		}
		var st struct {
			UploadBytes int64 `json:"upload_bytes"`
		}
		getJSON(t, "http://"+s.def.addr+"/_backend/streams", &st)
		if st.UploadBytes != size {
			t.Errorf("backend read %d bytes, want %d", st.UploadBytes, size)
		}
		resp, err = s.tlsC.Get("https://other.test/blob?size=" + strconv.Itoa(size))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || resp.StatusCode != 200 {
			t.Errorf("download: %d, %d bytes (%v), want 200, %d", resp.StatusCode, n, err, size)
		}
		_, peak := (&streamSetup{pb: s.pb}).memory(t)
		t.Logf("RSS before %d MiB, VmHWM after %d MiB", rss0/mib, peak/mib)
		if peak-rss0 >= 40*mib {
			t.Errorf("peak RSS grew by %d MiB for a 60 MiB body each way, want below 40 MiB", (peak-rss0)/mib)
		}
		testproc.WaitFor(t, 5*time.Second, "def-1 leases back to 0", func() bool { return s.inFlight(t, "def-1") == 0 })
	})

	t.Run("SETTINGS announce the limits and no extended CONNECT", func(t *testing.T) {
		rc := dialRawH2(t, s.tlsAddr, s.pair)
		rc.flush(t)
		_ = rc.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				t.Fatalf("no SETTINGS from the server: %v", err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok || sf.IsAck() {
				continue
			}
			if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 250 {
				t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d (sent %v), want 250", v, ok)
			}
			if v, ok := sf.Value(http2.SettingEnableConnectProtocol); ok {
				t.Errorf("SETTINGS_ENABLE_CONNECT_PROTOCOL sent (%d): WebSocket over HTTP/2 is not offered", v)
			}
			return
		}
	})

	t.Run("a connection-specific header cuts the connection before it is forwarded", func(t *testing.T) {
		before := s.def.stats(t).Requests
		rc := dialRawH2(t, s.tlsAddr, s.pair)
		rc.headers(t, 1, true, "other.test", "/")
		rc.flush(t)
		if status := rc.waitStatus(t, 1); status != "200" {
			t.Fatalf("stream 1 answered %q, want 200", status)
		}
		rc.headers(t, 3, true, "other.test", "/", hpack.HeaderField{Name: "connection", Value: "keep-alive"})
		rc.flush(t)
		err := rc.waitClosed(t)
		t.Logf("connection ended: %v", err)
		testproc.WaitFor(t, 5*time.Second, "the malformed request counted", func() bool {
			return s.metric(t, `pollbal_http2_resets_total{proto="h2",reason="malformed"}`) == 1
		})
		// Stream 1, answered before the malformed one came, reached the backend; stream 3 never.
		if n := s.def.stats(t).Requests - before; n != 1 {
			t.Errorf("%d requests reached the backend, want 1 (stream 1's)", n)
		}
	})
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// release answers the /hold requests waiting at b.
func release(t *testing.T, b *backend) {
	t.Helper()
	resp, err := http.Post("http://"+b.addr+"/_backend/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// rawH2 is a hand-written HTTP/2 client over TLS: it writes frames as the test says, valid or
// not, and reads what the server sends.
type rawH2 struct {
	conn net.Conn
	out  bytes.Buffer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func dialRawH2(t *testing.T, addr string, pair certstest.Pair) *rawH2 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: certstest.Pool(pair), ServerName: "other.test", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	rc := &rawH2{conn: conn}
	rc.fr = http2.NewFramer(&rc.out, conn)
	rc.enc = hpack.NewEncoder(&rc.hbuf)
	rc.out.WriteString(http2.ClientPreface)
	if err := rc.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return rc
}

// block encodes a request's header block.
func (rc *rawH2) block(host, path string, extra ...hpack.HeaderField) []byte {
	rc.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: host}, {Name: ":path", Value: path},
	}, extra...) {
		_ = rc.enc.WriteField(f)
	}
	return bytes.Clone(rc.hbuf.Bytes())
}

// headers queues a whole request's HEADERS frame.
func (rc *rawH2) headers(t *testing.T, stream uint32, endStream bool, host, path string, extra ...hpack.HeaderField) {
	t.Helper()
	err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: rc.block(host, path, extra...),
		EndStream: endStream, EndHeaders: true})
	if err != nil {
		t.Fatal(err)
	}
}

// flush sends what was queued, in one write.
func (rc *rawH2) flush(t *testing.T) {
	t.Helper()
	_ = rc.conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := rc.conn.Write(rc.out.Bytes()); err != nil {
		t.Fatalf("write frames: %v", err)
	}
	rc.out.Reset()
}

// waitStatus reads frames until the server answers stream, and returns the answer's :status
// ("" when the connection ended first).
func (rc *rawH2) waitStatus(t *testing.T, stream uint32) string {
	t.Helper()
	_ = rc.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return ""
		}
		h, ok := f.(*http2.HeadersFrame)
		if !ok {
			continue
		}
		fields, err := dec.DecodeFull(h.HeaderBlockFragment())
		if err != nil {
			t.Fatal(err)
		}
		if h.StreamID != stream {
			continue
		}
		for _, fl := range fields {
			if fl.Name == ":status" {
				return fl.Value
			}
		}
	}
}

// floodUntilClosed writes every frame buffered so far, from a goroutine of its own since the
// server stops reading once it cuts the connection (the write may then fail), and reads until
// the server has ended the connection.
func (rc *rawH2) floodUntilClosed(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = rc.conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, _ = rc.conn.Write(rc.out.Bytes())
	}()
	err := rc.waitClosed(t)
	wg.Wait()
	t.Logf("connection ended: %v", err)
}

// waitClosed reads until the server ends the connection, and reports how it ended: a GOAWAY's
// code, or the read error.
func (rc *rawH2) waitClosed(t *testing.T) error {
	t.Helper()
	_ = rc.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the connection open")
			}
			return err
		}
		_ = f
	}
}

// TestEndToEndHTTP2RapidReset: a client that opens 1,000 streams on one connection and resets
// each at once (CVE-2023-44487) is cut off before 200 of them reach a backend, counted, and
// leaves no lease held.
func TestEndToEndHTTP2RapidReset(t *testing.T) {
	s := startH2Setup(t)
	before := s.def.stats(t).Requests
	rc := dialRawH2(t, s.tlsAddr, s.pair)
	const streams = 1000
	for i := range streams {
		id := uint32(2*i + 1)
		rc.headers(t, id, true, "other.test", "/hold")
		if err := rc.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	rc.floodUntilClosed(t)
	testproc.WaitFor(t, 5*time.Second, "rapid reset counted", func() bool {
		return s.metric(t, `pollbal_http2_resets_total{proto="h2",reason="rapid_reset"}`) == 1
	})
	testproc.WaitFor(t, 5*time.Second, "def-1 leases back to 0", func() bool { return s.inFlight(t, "def-1") == 0 })
	testproc.WaitFor(t, 5*time.Second, "backend requests over", func() bool { return s.def.stats(t).LoadInFlight == 0 })
	reached := s.def.stats(t).Requests - before
	t.Logf("%d of %d reset streams reached the backend", reached, streams)
	if reached >= 200 {
		t.Errorf("%d reset streams reached the backend, want fewer than 200", reached)
	}
	if n := s.metric(t, `pollbal_client_streams{proto="h2"}`); n != 0 {
		t.Errorf("pollbal_client_streams %v after the cut, want 0", n)
	}
	// The listener serves the next client as before.
	if resp, _ := h2Get(t, s.tlsC, "https://other.test/"); resp.StatusCode != 200 {
		t.Errorf("after the cut: %d", resp.StatusCode)
	}
}

// TestEndToEndHTTP2ContinuationFlood: a header block that goes on in CONTINUATION frames past
// http2.max_header_bytes (CVE-2024-27316) closes the connection, is counted, and reaches no
// backend.
func TestEndToEndHTTP2ContinuationFlood(t *testing.T) {
	s := startH2Setup(t)
	before := s.def.stats(t).Requests
	rc := dialRawH2(t, s.tlsAddr, s.pair)
	first := rc.block("other.test", "/")
	if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 1000)
	for i := range 200 { // ~200 KiB of header block, three times the default limit
		rc.hbuf.Reset()
		_ = rc.enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-flood-%d", i), Value: value})
		if err := rc.fr.WriteContinuation(1, false, bytes.Clone(rc.hbuf.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
	rc.floodUntilClosed(t)
	testproc.WaitFor(t, 5*time.Second, "flood counted", func() bool {
		return s.metric(t, `pollbal_http2_resets_total{proto="h2",reason="continuation"}`) == 1
	})
	if n := s.def.stats(t).Requests - before; n != 0 {
		t.Errorf("%d requests reached the backend, want 0", n)
	}
	if n := s.inFlight(t, "def-1"); n != 0 {
		t.Errorf("def-1 in_flight %d, want 0", n)
	}
}

// TestEndToEndHTTP2Shutdown: SIGTERM with an HTTP/2 stream in flight and an idle HTTP/2
// connection: the stream is answered, both connections are told to go away, and pollbal exits
// 0 long before proxy.shutdown_timeout (30 s).
func TestEndToEndHTTP2Shutdown(t *testing.T) {
	s := startH2Setup(t)
	if resp, _ := h2Get(t, s.clearC, "http://other.test/"); resp.StatusCode != 200 { // an idle h2c connection
		t.Fatalf("h2c: %d", resp.StatusCode)
	}
	codes := make(chan int, 1)
	go func() {
		resp, err := s.tlsC.Get("https://shop.test/hold")
		if err != nil {
			t.Error(err)
			codes <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	testproc.WaitFor(t, 10*time.Second, "the stream at acme-1", func() bool { return s.inFlight(t, "acme-1") == 1 })
	start := time.Now()
	s.pb.Signal(t, syscall.SIGTERM)
	s.pb.WaitOutput(t, 10*time.Second, "shutdown began", "shutting down")
	release(t, s.acme)
	select {
	case code := <-codes:
		if code != 200 {
			t.Errorf("the stream in flight answered %d, want 200", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the stream in flight got no answer")
	}
	if code := s.pb.ExitCode(t, 15*time.Second); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("shutdown took %v: the HTTP/2 connections were not drained", took)
	}
}
