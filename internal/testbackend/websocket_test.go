package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"pollbal/internal/testbackend/api"
)

func TestWSAccept(t *testing.T) {
	// The example of RFC 6455 §1.3.
	if got := wsAccept("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Errorf("wsAccept = %q", got)
	}
}

// TestWebSocketEcho talks to /ws with a real client library: text and binary messages (one of
// them larger than a 16-bit length, so fragmented or extended), a ping, and a clean close.
func TestWebSocketEcho(t *testing.T) {
	h := newHandler(handlerOptions{ID: "b1", Capacity: 2})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake answered %d", resp.StatusCode)
	}
	c.SetReadLimit(1 << 20)
	for _, m := range []struct {
		typ  websocket.MessageType
		data []byte
	}{
		{websocket.MessageText, []byte("hello")},
		{websocket.MessageBinary, bytes.Repeat([]byte{0, 1, 2, 255}, 30000)},
		{websocket.MessageText, []byte(strings.Repeat("é", 100))},
	} {
		if err := c.Write(ctx, m.typ, m.data); err != nil {
			t.Fatal(err)
		}
		typ, got, err := c.Read(ctx)
		if err != nil || typ != m.typ || !bytes.Equal(got, m.data) {
			t.Fatalf("echo of a %v message of %d bytes: %v, %d bytes, %v", m.typ, len(m.data), typ, len(got), err)
		}
	}
	// Ping waits for the pong, which only a concurrent reader sees.
	readCtx := c.CloseRead(ctx)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if n := h.load.InFlight(); n != 1 {
		t.Errorf("load in flight %d with the socket open, want 1", n)
	}
	if err := c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
		t.Fatalf("close: %v", err)
	}
	<-readCtx.Done()
	deadline := time.Now().Add(5 * time.Second)
	for h.load.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("load in flight %d after the close, want 0", h.load.InFlight())
		}
		<-time.After(10 * time.Millisecond) // polling a counter, with a deadline
	}
	var s api.Stats
	r, err := http.Get(srv.URL + "/_backend/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Body.Close() }()
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil || s.WebSockets != 1 {
		t.Errorf("stats websockets %d, %v; want 1", s.WebSockets, err)
	}
}

// TestWebSocketRefusals covers what is not a valid handshake, and a client frame that is not
// masked.
func TestWebSocketRefusals(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{name: "plain GET", want: http.StatusBadRequest},
		{name: "no key", headers: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}, want: http.StatusBadRequest},
		{name: "old version", headers: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, want: http.StatusUpgradeRequired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("answered %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}

	t.Run("unmasked frame", func(t *testing.T) {
		c, err := net.Dial("tcp4", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Write([]byte("GET /ws HTTP/1.1\r\nHost: b\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
			t.Fatalf("handshake: %v, %v", resp, err)
		}
		if _, err := c.Write([]byte{0x81, 0x02, 'h', 'i'}); err != nil { // text "hi", no mask
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := br.Read(got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte{0x88, 0x02, 0x03, 0xEA}) { // close 1002
			t.Errorf("answer % x, want a close frame with 1002", got)
		}
	})
}
