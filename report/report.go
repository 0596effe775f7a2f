package report

import "slices"

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

// Equal is slices.Equal that also tells nil (not ready) from empty (ready, no services).
func Equal(a, b []Report) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
