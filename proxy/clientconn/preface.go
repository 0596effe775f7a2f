package clientconn

import "crypto/tls"

// ProtoH2C is what PrefaceConn reports as negotiated for a connection that opened with the
// HTTP/2 preface, the key of its fasthttp NextProto handler.
const ProtoH2C = "h2c"

// PrefaceConn is a plain client connection of a listener that accepts h2c (Hooks.H2C):
// fasthttp asks it for a handshake before serving it (as it asks a TLS connection), and it
// answers by reading the client's first bytes: when they are the HTTP/2 client preface it
// reports ProtoH2C as the negotiated protocol, and the server hands it over to its HTTP/2
// server; otherwise fasthttp serves it as HTTP/1.1. Either way, the bytes read are read again
// first. The peek runs in the header phase, so proxy.header_timeout bounds it. Like Conn,
// Read belongs to the serving goroutine; it must not be copied.
type PrefaceConn struct {
	*Conn
	peeked  []byte // read by Handshake, not yet by Read
	peekErr error  // the read error that ended the peek, returned once peeked is consumed
	proto   string
}

// Handshake reads until the bytes read are the whole preface, or stop being its start.
func (c *PrefaceConn) Handshake() error {
	var buf [len(http2Preface)]byte
	n := 0
	for n < len(buf) {
		m, err := c.Conn.Read(buf[n:])
		n += m
		if string(buf[:n]) != http2Preface[:n] {
			break
		}
		if err != nil {
			c.peekErr = err
			break
		}
	}
	c.peeked = append([]byte(nil), buf[:n]...)
	if string(c.peeked) == http2Preface {
		c.proto = ProtoH2C
	}
	return nil
}

// ConnectionState reports h2c as negotiated for a connection that opened with the preface.
func (c *PrefaceConn) ConnectionState() tls.ConnectionState {
	return tls.ConnectionState{NegotiatedProtocol: c.proto}
}

// Read returns the peeked bytes first.
func (c *PrefaceConn) Read(b []byte) (int, error) {
	if len(c.peeked) > 0 {
		n := copy(b, c.peeked)
		c.peeked = c.peeked[n:]
		return n, nil
	}
	if err := c.peekErr; err != nil {
		c.peekErr = nil
		return 0, err
	}
	return c.Conn.Read(b)
}

// http2Preface starts every HTTP/2 connection (RFC 9113 §3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
