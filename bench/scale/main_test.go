package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pollbal/configs"
)

// TestConfigIsValid checks that the configuration the tool writes passes pollbal's own
// validation and puts the backends where the options say.
func TestConfigIsValid(t *testing.T) {
	cases := []struct {
		name  string
		pools int
		want  map[string]int // backends per pool
	}{
		{name: "one pool: all in default", pools: 1, want: map[string]int{configs.PoolDefault: 5}},
		{name: "two pools by owner", pools: 2, want: map[string]int{"pool-t0": 3, "pool-t1": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := options{pools: tc.pools, interval: time.Second}
			cfg, err := configs.Parse(config(o, "127.0.0.1:18000", "127.0.0.1:18001", []int{20001, 20002, 20003, 20004, 20005}))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, b := range cfg.Backends {
				pool, _ := configs.BackendPool(b)
				got[pool]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("backends per pool %v, want %v", got, tc.want)
			}
			if cfg.Poll.Interval != time.Second || cfg.Poll.Timeout >= cfg.Poll.Interval {
				t.Fatalf("poll interval %v, timeout %v", cfg.Poll.Interval, cfg.Poll.Timeout)
			}
		})
	}
}

// TestHelperAnswersKeepAliveChecks sends two checks on one connection, as the poller does, and
// expects the /pool answer to each.
func TestHelperAnswersKeepAliveChecks(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	go answer(server)
	br := bufio.NewReader(client)
	for i := 0; i < 2; i++ {
		req := "GET /pool HTTP/1.1\r\nHost: 127.0.0.1:20001\r\nUser-Agent: pollbal/test\r\nX-Pollbal-Site: scale\r\n\r\n"
		if _, err := io.WriteString(client, req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(poolAnswer))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if string(got) != poolAnswer {
			t.Fatalf("check %d: answer %q", i, got)
		}
		if !strings.HasSuffix(string(got), "\r\n\r\nweb serving v1\n") {
			t.Fatalf("check %d: body is not the /pool line", i)
		}
	}
}

// TestCountReady counts the ready backends of a state document.
func TestCountReady(t *testing.T) {
	doc := `{"site":"scale","version":"x","ready":true,"backends":[` +
		`{"id":"b0","ready":true,"reason":""},{"id":"b1","ready":false,"reason":"down"},{"id":"b2","ready":true,"reason":""}],` +
		`"groups":[],"apps":[],"pools":[],"events":[{"kind":"ready","message":"backend b0 is ready"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, doc) }))
	defer srv.Close()
	for _, n := range []int{2, 3} { // 2: the full decode confirms; 3: the quick count stops
		got, err := countReady(srv.Client(), srv.URL, n)
		if err != nil {
			t.Fatal(err)
		}
		if got != 2 {
			t.Fatalf("n=%d: %d ready, want 2", n, got)
		}
	}
}
