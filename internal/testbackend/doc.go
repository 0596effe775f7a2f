// Command backend is a small example backend for pollbal, used by tests and the demo.
//
// It serves the backend side of the /pool protocol (docs/protocol.md):
//
//   - GET /pool answers 200 with the bytes of -pool-file. A missing file answers 200 with an
//     empty body, which in the protocol means "in no service" (out of rotation, still ready);
//     the update script empties or removes the file to drain the backend.
//   - POST /pool_warning touches -lock-file (creates it if missing, sets its mtime to now) and
//     answers 204. With -secret-file it first checks X-Pollbal-Timestamp (within ±300 s) and
//     X-Pollbal-Signature (sha256=<hex HMAC-SHA256(secret, timestamp+"\n"+body)>); a request
//     that fails the check answers 401 and does not touch the lock.
//   - GET /_backend/stats answers JSON counters (not counted itself).
//   - /_backend/headers answers JSON of the request as it arrived: method, target, Host, the
//     peer's address and every header line (not counted): what a proxy added, replaced or dropped.
//   - GET /blob?size=N streams N bytes generated chunk by chunk (never held whole), with
//     Content-Length unless chunked=1; chunk=C sets the piece size, delay=D pauses before each
//     piece after the first (each piece is then flushed), hold=D pauses before the headers.
//   - POST /upload reads the body to the end, discarding it, and answers {"bytes": N}.
//   - /switch answers 101 Switching Protocols to any request and holds the connection open:
//     a misbehaving backend, for testing that a proxy does not pass it on.
//   - GET /_backend/streams answers JSON counters of those: blobs sent whole, blobs cancelled
//     because the client connection closed first, uploads and the latest upload's size, 101s.
//   - GET /ws is a WebSocket echo (RFC 6455, written here with the standard library): after the
//     handshake every text or binary frame comes back as it was sent, pings get pongs and a
//     close gets a close. The connection counts as one client request for as long as it is
//     open; /_backend/stats counts the connections accepted in websockets.
//   - GET /hold answers like every other path (and is counted the same way), but only once
//     POST /_backend/release was called after it arrived: a test decides how long a request
//     holds its slot. The release answers {"released": N}, the requests it let go.
//   - GET /status?code=N answers status N (200 to 599) with the body "N\n", counted like
//     every other path: a backend's own 4xx or 5xx.
//   - Every other path answers 200 "<id>\n" with X-Backend-Id: <id> after -delay; only these
//     requests and /hold count in in_flight, peak_in_flight and requests. The answer's
//     X-Backend-Forwarded-Proto repeats the request's X-Forwarded-Proto.
//
// -capacity N (> 0) makes it a backend that shares its capacity with every balancer in front
// of it (internal/testbackend/poolload): a client request (any path but /pool, /pool_warning and
// /_backend/*) past N in progress at once is refused with 503, X-Pool-Full and Retry-After
// before any work, and GET /pool answers carry X-Pool-Load: <in_flight>/N (not with
// -no-load-report). /_backend/stats then shows capacity, load_in_flight, load_peak (the most
// client requests ever in progress at once) and refused.
//
// -id defaults to the bound listen address.
//
// It prints "listening <addr>" on stdout once the listener is bound (so -listen 127.0.0.1:0
// can be used) and shuts down cleanly on SIGTERM or SIGINT.
package main
