package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"pollbal/internal/testbackend/api"
	"pollbal/internal/testproc"
)

func statsAt(t *testing.T, url string) api.Stats {
	t.Helper()
	resp, err := http.Get(url + "/_backend/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var s api.Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitStats polls the stats until cond holds.
func waitStats(t *testing.T, url, what string, cond func(api.Stats) bool) {
	t.Helper()
	testproc.WaitFor(t, 10*time.Second, what, func() bool { return cond(statsAt(t, url)) })
}

func release(t *testing.T, url string) int64 {
	t.Helper()
	resp, err := http.Post(url+"/_backend/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got struct{ Released int64 }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got.Released
}

func TestHoldUntilRelease(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)

	type answer struct {
		body string
		err  error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(srv.URL + "/hold")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			answers <- answer{body: string(b), err: err}
		}()
	}
	waitStats(t, srv.URL, "two held requests", func(s api.Stats) bool { return s.InFlight == 2 })
	select {
	case a := <-answers:
		t.Fatalf("a held request answered before the release: %+v", a)
	default:
	}
	if n := release(t, srv.URL); n != 2 {
		t.Fatalf("release let %d go, want 2", n)
	}
	for range 2 {
		if a := <-answers; a.err != nil || a.body != "b1\n" {
			t.Fatalf("held request answered %+v, want b1", a)
		}
	}
	s := statsAt(t, srv.URL)
	if s.InFlight != 0 || s.PeakInFlight != 2 || s.Requests != 2 {
		t.Fatalf("stats %+v, want 0 in flight, peak 2, 2 requests", s)
	}
	if n := release(t, srv.URL); n != 0 {
		t.Fatalf("release with nothing held let %d go", n)
	}
}

func TestHoldEndsWhenTheClientLeaves(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hold", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	waitStats(t, srv.URL, "the held request", func(s api.Stats) bool { return s.InFlight == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	waitStats(t, srv.URL, "the held request to end", func(s api.Stats) bool { return s.InFlight == 0 })
	if n := release(t, srv.URL); n != 0 {
		t.Fatalf("release let %d go after the client left, want 0", n)
	}
}

func TestReleaseWantsPost(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/_backend/release")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /_backend/release: %d, want 405", resp.StatusCode)
	}
}
