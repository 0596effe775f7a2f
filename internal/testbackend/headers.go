package main

import (
	"net/http"
)

// requestSeen is the JSON answer of /_backend/headers: the request as this backend received it.
type requestSeen struct {
	Method     string              `json:"method"`
	RequestURI string              `json:"request_uri"`
	Host       string              `json:"host"`
	RemoteAddr string              `json:"remote_addr"`
	Headers    map[string][]string `json:"headers"` // canonical name → values, in arrival order
}

// serveHeaders answers any request to /_backend/headers with what arrived: method, target,
// Host, the peer's address and every header line, so a test can see what a proxy in front
// added, replaced or dropped. It is not counted in the stats.
func (h *handler) serveHeaders(w http.ResponseWriter, r *http.Request) {
	seen := requestSeen{Method: r.Method, RequestURI: r.RequestURI, Host: r.Host, RemoteAddr: r.RemoteAddr, Headers: r.Header}
	writeJSON(w, seen)
}
