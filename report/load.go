package report

import "time"

// Load is a backend's report of its own load, from the X-Pool-Load header of a good /pool
// answer, with when that answer arrived. A plain value; it may be copied.
type Load struct {
	InFlight int64     // requests in progress on the backend, from every balancer and client
	Capacity int64     // the backend's capacity; 0 when it reported none
	At       time.Time // when the answer arrived
}
