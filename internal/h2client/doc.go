// Package h2client is a raw HTTP/2 client for benchmarks: it sends GET requests as HEADERS
// frames over a cleartext connection, a given number of streams in flight at a time, and
// counts the streams the server ended, so that a profile of a benchmark shows the server's
// work rather than a client's.
package h2client
