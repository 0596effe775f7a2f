package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testproc"
)

func streamStatsOf(t *testing.T, url string) api.Streams {
	t.Helper()
	resp, err := http.Get(url + "/_backend/streams")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var s api.Streams
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBlobUploadAndSwitch(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)

	for _, tt := range []struct {
		name, query string
		size        int64
		wantCL      int64
	}{
		{name: "fixed length", query: "size=100000", size: 100000, wantCL: 100000},
		{name: "chunked", query: "size=70000&chunked=1&chunk=1000", size: 70000, wantCL: -1},
		{name: "empty", query: "size=0", size: 0, wantCL: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/blob?" + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || int64(len(body)) != tt.size || resp.ContentLength != tt.wantCL {
				t.Fatalf("got %d, %d bytes (Content-Length %d), %v", resp.StatusCode, len(body), resp.ContentLength, err)
			}
			if tt.size > 27 && string(body[:27]) != "abcdefghijklmnopqrstuvwxyza" {
				t.Fatalf("body starts %q", body[:27])
			}
		})
	}

	resp, err := http.Post(srv.URL+"/upload", "application/octet-stream", strings.NewReader(strings.Repeat("x", 123456)))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]int64
	_ = json.NewDecoder(resp.Body).Decode(&got)
	_ = resp.Body.Close()
	if got["bytes"] != 123456 {
		t.Fatalf("upload answered %v, want 123456 bytes", got)
	}

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET /switch HTTP/1.1\r\nHost: x\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	_ = c.Close()
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("/switch answered %q, %v", line, err)
	}

	s := streamStatsOf(t, srv.URL)
	if s.Blobs != 3 || s.Uploads != 1 || s.UploadBytes != 123456 || s.Upgrades != 1 || s.Cancelled != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBlobCountsAClientThatLeaves(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET /blob?size=100000000&delay=20ms HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	testproc.WaitFor(t, 10*time.Second, "the backend to count the closed client", func() bool {
		return streamStatsOf(t, srv.URL).Cancelled == 1
	})
}
