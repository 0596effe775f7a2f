// Package poolload is the backend side of pollbal's shared capacity, as a net/http middleware
// any Go backend can use: it counts the requests in progress exactly, refuses those over the
// backend's capacity with 503 and X-Pool-Full before any work is done, and reports the count
// in the X-Pool-Load header of the backend's GET /pool answer.
//
//	lim := poolload.New(64)
//	mux.Handle("/pool", lim.Report(poolHandler))  // X-Pool-Load: <in_flight>/64
//	mux.Handle("/", lim.Limit(appHandler))         // 503 + X-Pool-Full past 64 at once
//
// Every pollbal instance in front of the backend then sends it at most what the others leave
// free, and the refusal makes the backend's capacity a hard limit whatever they do.
package poolload
