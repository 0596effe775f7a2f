// Package proxy is pollbal's data plane: a fasthttp server that routes each client request by
// Host to an app, takes a capacity lease on a backend of the app's node pool through the
// balancer, forwards the request over that backend's own connection pool (package upstream,
// pollbal's own HTTP/1.1 client), and releases the lease when the forward ends. The forward
// is a small state machine whose next step a pure function decides (forward.go). It makes the answers pollbal gives itself (404 no_app,
// 503 pool_exhausted, 413 body_too_large, 502 backend_unreachable and bad_response, 504
// backend_timeout; 405 for CONNECT and TRACE; 400 for a header name that is not a token or
// for userinfo in the target or Host), strips hop-by-hop headers both ways (and header names
// with "_" from requests, X-Pollbal-* from answers), adds X-Forwarded-* and X-Pollbal-*
// headers, retries requests that could not reach a backend on the next candidate, reports what
// each forward learned to the balancer through its one feedback port, Balancer.Report (answered,
// refused as full, failed with its reason, timed out; exhausted for a request answered as for an
// exhausted pool), counts requests per app and status code (requests.go) and its own answers by
// reason (answermetrics.go). A backend's
// answer that comes before it has read the request is passed on, not taken for a failure, and
// a backend connection is never reused after an answer without a body (upstream).
//
// Every request keeps its X-Request-Id, or gets one, which goes to the backend and back on the
// answer (requestid.go), and fills one access-log entry at fixed points of its way — begun,
// routed, each backend tried, its outcome, its end — which is logged when the request ends: by
// the handler, or by the streamed body or upgraded connection that took the entry over
// (logentry.go; endOf says how the request ended).
//
// Bodies are streamed with bounded memory both ways. A response body up to 64 KiB
// is read whole and answered, freeing the backend connection and lease at once; a larger one,
// or one of unknown length, is streamed to the client as it arrives through a pooled 64 KiB
// buffer, and its lease is held until the last byte has been written to the client
// (upstream.ResponseBody). A request body up to proxy.buffer_request_body is read whole first, so the
// request may be retried on another backend; a larger one is streamed to the backend and is
// never retried once sent (body.go). A 101 Switching Protocols to a plain request is answered
// 502 bad_response.
//
// The request path reads one balancer snapshot per request (a lease handed over by the queue
// comes from the snapshot current then) and does not allocate beyond what fasthttp itself does
// for small bodies; the per-app request metrics and the per-backend pools are in tables derived
// from the balancer's current configuration behind atomic pointers (requests.go,
// upstream.Pools), so a reload needs no call into the proxy. Forwards run without per-request
// deadlines: a watchdog enforces proxy.backend_timeout by closing backend connections whose
// request has outlasted it, and closes the backend connection of a forward whose client went
// away (reset or closed; clientconn.Gone tells) within a fraction of a second, which ends the
// forward and releases its lease (upstream.Watchdog). The client side works the same way
// (package clientconn): each listener survives failing Accepts and enforces
// proxy.max_connections, and its one scanner enforces the header, client and idle timeouts from
// two atomic words per connection, which also let Shutdown close every connection without a
// request in flight. The proxy answers for the listeners through clientconn.Hooks (the 408 to
// headers that came too late: headertimeout.go).
//
// HTTP/2 clients (http2.go) are served by package h2 with the same Handler: fasthttp hands over
// a TLS connection that chose h2 by ALPN, and, with http2.h2c, a plain connection whose first
// bytes are the HTTP/2 preface (clientconn.PrefaceConn); each stream's RequestCtx sees a
// connection of its own, which the client checks ask whether the stream was reset
// (h2.StreamGone).
package proxy
