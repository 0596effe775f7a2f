package main

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestOriginAnswers(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantBody   string // exact body, unless wantLen is set
		wantLen    int
	}{
		{name: "root is 1 KiB", method: "GET", path: "/", wantStatus: 200, wantLen: 1024},
		{name: "pool answer names the service", method: "GET", path: "/pool", wantStatus: 200, wantBody: "web serving v1"},
		{name: "204 has no body", method: "GET", path: "/204", wantStatus: 204, wantLen: 0},
		{name: "stats counts the three served requests before it", method: "GET", path: "/stats", wantStatus: 200, wantBody: "b1 3\n"},
		{name: "unknown path", method: "GET", path: "/nope", wantStatus: 404, wantBody: "not found\n"},
		{name: "POST refused", method: "POST", path: "/", wantStatus: 405, wantBody: ""},
	}
	o := newOrigin(" b1 ")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI(tc.path)
			o.handle(&ctx)
			if got := ctx.Response.StatusCode(); got != tc.wantStatus {
				t.Fatalf("status = %d, want %d", got, tc.wantStatus)
			}
			body := string(ctx.Response.Body())
			if tc.wantLen > 0 {
				if len(body) != tc.wantLen {
					t.Fatalf("body length = %d, want %d", len(body), tc.wantLen)
				}
			} else if body != tc.wantBody {
				t.Fatalf("body = %q, want %q", body, tc.wantBody)
			}
			if got := string(ctx.Response.Header.Peek("X-Backend")); got != "b1" {
				t.Fatalf("X-Backend = %q, want b1", got)
			}
		})
	}
}
