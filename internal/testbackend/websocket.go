package main

import (
	"bufio"
	"crypto/sha1" // #nosec G505 -- RFC 6455 fixes SHA-1 for the handshake; it protects nothing
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
)

// The WebSocket echo endpoint, GET /ws: the minimal server side of RFC 6455 that a proxy in
// front of it needs to be tested with (the allowed dependencies have no WebSocket library). It
// echoes every data frame as it came (text or binary, fragments included), answers pings with
// pongs, and answers a close with a close. The connection counts as one request in flight (and
// against -capacity) for as long as it is open.

// wsGUID is the fixed string of the handshake (RFC 6455 §1.3).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// maxWSFrame bounds the payload of one frame the endpoint reads.
const maxWSFrame = 1 << 20

// WebSocket opcodes (RFC 6455 §5.2).
const (
	wsContinuation = 0x0
	wsText         = 0x1
	wsBinary       = 0x2
	wsClose        = 0x8
	wsPing         = 0x9
	wsPong         = 0xA
)

// Close codes the endpoint sends (RFC 6455 §7.4.1).
const (
	wsProtocolError = 1002
	wsTooBig        = 1009
)

// wsAccept is the Sec-WebSocket-Accept value for a Sec-WebSocket-Key.
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID)) // #nosec G401 -- see the import
	return base64.StdEncoding.EncodeToString(sum[:])
}

// headerHasToken reports whether a comma-separated header of r lists token (any case).
func headerHasToken(r *http.Request, name, token string) bool {
	for _, v := range r.Header.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serveWebSocket is GET /ws: the handshake, then the echo until either side closes.
func (h *handler) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if r.Method != http.MethodGet || !headerHasToken(r, "Connection", "upgrade") ||
		!headerHasToken(r, "Upgrade", "websocket") || key == "" {
		http.Error(w, "a WebSocket handshake is expected here", http.StatusBadRequest)
		return
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		http.Error(w, "unsupported WebSocket version", http.StatusUpgradeRequired)
		return
	}
	c, rw, ok := hijack(w)
	if !ok {
		return
	}
	defer func() { _ = c.Close() }()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		wsAccept(key) + "\r\n\r\n")
	if rw.Flush() != nil {
		return
	}
	h.websockets.Add(1)
	_ = wsEcho(rw.Reader, rw.Writer)
}

// wsFrame is one frame as read: its header bits and its unmasked payload.
type wsFrame struct {
	fin     bool
	opcode  byte
	payload []byte
}

// errWSProtocol is a frame that breaks RFC 6455; errWSTooBig one over maxWSFrame.
var (
	errWSProtocol = errors.New("websocket protocol error")
	errWSTooBig   = errors.New("websocket frame too big")
)

// wsEcho reads frames from r and answers them on w until a close frame (answered in kind),
// an error, or the end of r.
func wsEcho(r *bufio.Reader, w *bufio.Writer) error {
	for {
		f, err := readWSFrame(r)
		switch {
		case errors.Is(err, errWSProtocol):
			return writeWSClose(w, wsProtocolError)
		case errors.Is(err, errWSTooBig):
			return writeWSClose(w, wsTooBig)
		case err != nil:
			return err
		}
		switch f.opcode {
		case wsText, wsBinary, wsContinuation:
			err = writeWSFrame(w, f.fin, f.opcode, f.payload)
		case wsPing:
			err = writeWSFrame(w, true, wsPong, f.payload)
		case wsPong:
		case wsClose:
			payload := f.payload
			if len(payload) >= 2 {
				payload = payload[:2] // the status code, without the reason
			}
			_ = writeWSFrame(w, true, wsClose, payload)
			return nil
		default:
			return writeWSClose(w, wsProtocolError)
		}
		if err != nil {
			return err
		}
	}
}

// readWSFrame reads one client frame: it must be masked (RFC 6455 §5.1), a control frame must
// be whole and at most 125 bytes.
func readWSFrame(r *bufio.Reader) (wsFrame, error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return wsFrame{}, err
	}
	f := wsFrame{fin: head[0]&0x80 != 0, opcode: head[0] & 0x0F}
	if head[0]&0x70 != 0 || head[1]&0x80 == 0 { // reserved bits without an extension; unmasked
		return f, errWSProtocol
	}
	n := uint64(head[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if f.opcode&0x8 != 0 && (n > 125 || !f.fin) {
		return f, errWSProtocol
	}
	if n > maxWSFrame {
		return f, errWSTooBig
	}
	var mask [4]byte
	if _, err := io.ReadFull(r, mask[:]); err != nil {
		return f, err
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= mask[i%4]
	}
	return f, nil
}

// writeWSFrame writes one unmasked server frame and flushes it.
func writeWSFrame(w *bufio.Writer, fin bool, opcode byte, payload []byte) error {
	b0 := opcode
	if fin {
		b0 |= 0x80
	}
	head := []byte{b0, 0}
	switch n := len(payload); {
	case n <= 125:
		head[1] = byte(n)
	case n <= 0xFFFF:
		head[1] = 126
		head = binary.BigEndian.AppendUint16(head, uint16(n))
	default:
		head[1] = 127
		head = binary.BigEndian.AppendUint64(head, uint64(n))
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	return w.Flush()
}

// writeWSClose sends a close frame with a status code.
func writeWSClose(w *bufio.Writer, code uint16) error {
	return writeWSFrame(w, true, wsClose, binary.BigEndian.AppendUint16(nil, code))
}

// hijack takes the connection over from net/http (for a 101 answer and what follows). It
// answers 500 when the server cannot hand it over; ok is false then, and when the hand-over
// failed.
func hijack(w http.ResponseWriter) (c net.Conn, rw *bufio.ReadWriter, ok bool) {
	hj, can := w.(http.Hijacker)
	if !can {
		http.Error(w, "cannot take over the connection", http.StatusInternalServerError)
		return nil, nil, false
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, false
	}
	return c, rw, true
}
