// Package h2 serves HTTP/2 client connections with the proxy's one request handler. A
// connection negotiated by ALPN on the TLS listener (fasthttp hands it over after the
// handshake), or one that opened with the HTTP/2 preface on the plain listener (h2c), is
// served by golang.org/x/net/http2; each of its streams becomes a *fasthttp.RequestCtx that
// runs the same fasthttp.RequestHandler as an HTTP/1.1 request — routing, leases, queue,
// retries, X-Pollbal-* headers, access log, limits — and whose response is copied to the
// stream under HTTP/2 flow control: a whole body with the header block and END_STREAM, a
// streamed one with a flush per piece but the last (stream.go). The RequestCtx and the
// header buffers are pooled; the connection a stream's handler sees is its own.
//
// What x/net/http2 does not do by itself is done here, on the bytes the client sends, as they
// come into the connection's read buffer, before the HTTP/2 server reads them (frames.go,
// conn.go): a client that resets streams faster than it lets them complete (rapid reset,
// CVE-2023-44487) and one whose header block grows past http2.max_header_bytes on the wire (a
// CONTINUATION flood, CVE-2024-27316) are cut off by closing the connection, and so is one
// that sends a request with a connection-specific header field, which HTTP/2 calls malformed
// (x/net/http2 would answer it 400 itself): the watch decodes every header block in step with
// the server's decoder. Each cut is counted in pollbal_http2_resets_total. The decision on
// resets is a pure function of the connection's reset debt (reset.go).
//
// Server is safe for concurrent use; a connection's state belongs to the goroutines the HTTP/2
// server runs for it.
package h2
