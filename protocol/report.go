package protocol

import (
	"slices"
	"time"
)

// Status is what a backend says about one service it serves, in canonical form.
type Status string

// Canonical statuses. The alias "ok" is parsed as Serving.
const (
	Serving Status = "serving"
	Leaving Status = "leaving"
)

// Report is one line of a /pool answer: a service the backend serves, its status and its version
// ("" when unversioned). A Report is a plain value; it may be copied.
type Report struct {
	Service string `json:"service"`
	Status  Status `json:"status"`
	Version string `json:"version"`
}

// EqualReports is slices.Equal that also tells nil (not ready) from empty (ready, no services).
func EqualReports(a, b []Report) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// Load is a backend's report of its own load, from the X-Pool-Load header of a good /pool
// answer, with when that answer arrived. A plain value; it may be copied.
type Load struct {
	InFlight int64     // requests in progress on the backend, from every balancer and client
	Capacity int64     // the backend's capacity; 0 when it reported none
	At       time.Time // when the answer arrived
}
