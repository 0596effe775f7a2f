package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"pollbal/internal/testbackend/api"
)

// TestCapacity checks -capacity: client requests in progress are counted exactly, /pool reports
// them in X-Pool-Load, and one over the capacity is refused with 503 + X-Pool-Full before any
// work (it never reaches the handler's own counters).
func TestCapacity(t *testing.T) {
	tests := []struct {
		name     string
		noReport bool
		wantLoad string // X-Pool-Load with two requests held
	}{
		{name: "reports its load", wantLoad: "2/2"},
		{name: "enforces without reporting", noReport: true, wantLoad: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1", Capacity: 2, NoLoadReport: tt.noReport}))
			t.Cleanup(srv.Close)
			done := make(chan int, 2)
			for range 2 {
				go func() {
					resp, err := http.Get(srv.URL + "/hold")
					if err != nil {
						done <- 0
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					done <- resp.StatusCode
				}()
			}
			waitStats(t, srv.URL, "two held", func(s api.Stats) bool { return s.LoadInFlight == 2 })
			resp, err := http.Get(srv.URL + "/pool")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if got := resp.Header.Get("X-Pool-Load"); got != tt.wantLoad {
				t.Errorf("X-Pool-Load %q, want %q", got, tt.wantLoad)
			}
			resp, err = http.Post(srv.URL+"/upload", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Pool-Full") == "" {
				t.Fatalf("third request: %d %v, want 503 with X-Pool-Full", resp.StatusCode, resp.Header)
			}
			if n := release(t, srv.URL); n != 2 {
				t.Fatalf("released %d, want 2", n)
			}
			for range 2 {
				if code := <-done; code != 200 {
					t.Fatalf("held request answered %d", code)
				}
			}
			s := statsAt(t, srv.URL)
			if s.Capacity != 2 || s.LoadInFlight != 0 || s.LoadPeak != 2 || s.Refused != 1 || s.Requests != 2 || s.PeakInFlight != 2 {
				t.Fatalf("stats %+v: want capacity 2, load_in_flight 0, load_peak 2, refused 1, requests 2, peak 2", s)
			}
		})
	}
}

func TestNoCapacityReportsNothing(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/pool")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := resp.Header.Get("X-Pool-Load"); got != "" {
		t.Fatalf("X-Pool-Load %q without -capacity, want none", got)
	}
}
