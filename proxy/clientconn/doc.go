// Package clientconn is the client side of pollbal's data plane below HTTP: the listener that
// survives failing Accepts and enforces proxy.max_connections (listener.go), the tracked
// connection whose two atomic words say where its request is (conn.go), the one scanner per
// listener that enforces the header, client and idle timeouts from those words and drains
// connections at shutdown (scan.go), TLS on top of a tracked connection (tlsconn.go), and the
// peek that tells that a client went away without reading from it (gone.go).
//
// It knows connections, not requests: what a listener needs from the server (a place under
// the connection limit, the current timeouts, the answer to a request whose headers came too
// late, the counters) comes in through Hooks. A Conn's Read and Write are the serving
// goroutine's and cost no lock and no clock read; the scanner reads the words under the
// listener's lock.
package clientconn
