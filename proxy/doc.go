// Package proxy is pollbal's data plane: a fasthttp server that routes each client request by
// Host to an app, takes a capacity lease on a backend of the app's node pool through the
// balancer, forwards the request on that backend's own HostClient, and releases the lease when
// the forward ends (SPEC §4). It makes the answers pollbal gives itself (404 no_app,
// 503 pool_exhausted, 413 body_too_large, 502 backend_unreachable, 504 backend_timeout), strips
// hop-by-hop headers both ways, adds X-Forwarded-* and X-Pollbal-* headers, retries requests that
// could not reach a backend on the next candidate, and counts requests per app and status code.
//
// The request path reads one balancer snapshot per request and does not allocate beyond what
// fasthttp itself does; the per-backend clients and per-app metric children are resolved through
// copy-on-write maps behind atomic pointers. Forwards run without per-request deadlines: a
// watchdog enforces proxy.backend_timeout by closing backend connections whose request has
// outlasted it (watchdog.go). The client side works the same way: each listener (listener.go)
// survives failing Accepts and enforces proxy.max_connections, and its one scanner (scan.go)
// enforces the header, client and idle timeouts from two atomic words per connection
// (clientconn.go), which also let Shutdown close every connection without a request in flight.
package proxy
