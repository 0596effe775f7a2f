package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServeHeaders(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/_backend/headers?x=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "shop.test"
	req.Header.Add("X-Real-IP", "9.9.9.9")
	req.Header.Add("X-Forwarded-For", "1.1.1.1")
	req.Header.Add("X-Forwarded-For", "2.2.2.2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got requestSeen
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	h := http.Header(got.Headers)
	if got.Method != "POST" || got.RequestURI != "/_backend/headers?x=1" || got.Host != "shop.test" || got.RemoteAddr == "" ||
		h.Get("X-Real-IP") != "9.9.9.9" || len(h.Values("X-Forwarded-For")) != 2 || h.Values("X-Forwarded-For")[1] != "2.2.2.2" {
		t.Errorf("got %+v", got)
	}
	if s := statsAt(t, srv.URL); s.Requests != 0 {
		t.Errorf("requests = %d, want 0 (not counted)", s.Requests)
	}
}

func TestServeStatus(t *testing.T) {
	srv := httptest.NewServer(newHandler(handlerOptions{ID: "b1"}))
	t.Cleanup(srv.Close)
	for query, want := range map[string]int{"code=503": 503, "code=418": 418, "code=204": 204, "code=99": 400, "code=600": 400, "": 400} {
		resp, err := http.Get(srv.URL + "/status?" + query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/status?%s: %d %q, want %d", query, resp.StatusCode, body, want)
		}
		if want != 400 && want != 204 && string(body) != fmt.Sprintf("%d\n", want) {
			t.Errorf("/status?%s: body %q", query, body)
		}
	}
	if s := statsAt(t, srv.URL); s.Requests != 6 {
		t.Errorf("requests = %d, want 6 (each counted)", s.Requests)
	}
}
