// Package upstream is pollbal's own HTTP/1.1 client to its backends: a connection pool per
// backend of the balancer's current configuration (pools.go, backendconn.go), the round trip
// on one of its connections (roundtrip.go), the streamed response body that holds the
// connection until the client has it (stream.go), and the watchdog that enforces
// proxy.backend_timeout without per-request deadlines and closes the backend connection of a
// forward whose client went away (watchdog.go, clientcheck.go).
//
// It knows HTTP framing and connections, not requests' policy: which backend to use, whether
// to retry, and what to answer are the proxy's. What it needs from the client side comes in
// as values and hooks: the request context, the streamed request body (Upload), how to tell
// that a client went away, and the owner a streamed body reports its end to (BodyOwner).
//
// A backend connection is never reused after an answer without a body, nor after bytes past
// its response, nor once the watchdog marked it; the round trip allocates nothing per request
// beyond what fasthttp does for small bodies.
package upstream
