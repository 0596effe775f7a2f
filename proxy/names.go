package proxy

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// nameKind is what the forward path does with a request header by its name. A name holding
// "_" is dropped, as NGINX does by default (underscores_in_headers off): CGI, WSGI and Rack
// turn "-" and "_" alike into "_" (HTTP_X_FORWARDED_FOR), so a client's X_Forwarded_For would
// reach such a backend as the X-Forwarded-For that pollbal replaces.
type nameKind uint8

const (
	nameForwarded  nameKind = iota // a token without "_": forwarded (or handled by its class)
	nameUnderscore                 // a token with "_": dropped
	nameInvalid                    // empty, or a byte outside the token characters: 400
)

// nameBytes marks each byte by what it makes of a header name: 0 for a token character other
// than "_" (RFC 9110 §5.6.2), nameUnderscore for "_", nameInvalid for every other byte. It is a
// read-only table, built once.
var nameBytes = buildNameBytes()

func buildNameBytes() (t [256]nameKind) {
	for c := range t {
		t[c] = nameInvalid
	}
	for _, c := range []byte("!#$%&'*+-.^`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
		t[c] = nameForwarded
	}
	t['_'] = nameUnderscore
	return t
}

// requestName is the kind of a request header name: one table lookup per byte, without
// branches, so that it costs little on every header of every request.
func requestName(key []byte) nameKind {
	if len(key) == 0 {
		return nameInvalid
	}
	var k nameKind
	for _, c := range key {
		k |= nameBytes[c]
	}
	if k&nameInvalid != 0 {
		return nameInvalid
	}
	return k
}

// dropTrailers removes the fields of a request's trailer section, and the Trailer list that
// names them. fasthttp keeps the fields of a chunked body's trailer section apart from the
// header fields, and then, as pollbal forwards such a body with a Content-Length, turns them
// into header fields, or writes them after a body it streams: either way past the checks
// prepareRequest makes of header names and client-identity headers (a trailer "Forwarded"
// would reach the backend as a header). A header field of the same name as a trailer field
// goes too. Without a trailer section it costs a look at an empty list, and no allocation.
func dropTrailers(h *fasthttp.RequestHeader) {
	if len(h.Peek(fasthttp.HeaderTrailer)) == 0 {
		return
	}
	if wasDisabled := h.DisableNormalizing(); !wasDisabled {
		defer h.EnableNormalizing() // the names are in the header's own form
	}
	for name := range h.Trailers() {
		h.DelBytes(name) // in both sections; the list itself stays until Trailer goes
	}
	h.Del(fasthttp.HeaderTrailer)
}

// hasUserinfo reports whether a request names userinfo ("user:password@") in its Host header
// or in the authority of its target (absolute-form "http://user@host/", or "//user@host/").
// uri is the request's parsed URI, which also catches what its parser took for userinfo:
// fasthttp would send that to the backend as an Authorization header of its own making.
func hasUserinfo(host, target []byte, uri *fasthttp.URI) bool {
	if bytes.IndexByte(host, '@') >= 0 || len(uri.Username()) > 0 || len(uri.Password()) > 0 {
		return true
	}
	switch {
	case bytes.HasPrefix(target, []byte("//")):
		target = target[len("//"):]
	case len(target) > 0 && target[0] == '/':
		return false // origin-form: a path and a query, whatever they hold
	default:
		i := bytes.Index(target, []byte("://"))
		if i < 0 {
			return false // asterisk-form, or authority-form (CONNECT, refused anyway)
		}
		target = target[i+len("://"):]
	}
	for _, c := range target {
		switch c {
		case '@':
			return true
		case '/', '?', '#':
			return false
		}
	}
	return false
}

// answerBadHeaderName is the 400 for a request with a header name that is not a token (a
// space, a control byte, a separator): a server behind pollbal might read that name another
// way. The connection is closed after it, as fasthttp closes one whose request it could not
// parse.
func answerBadHeaderName(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusBadRequest, reasonBadRequest)
	r.AppendBodyString("malformed request: a header name is not a token\n")
	ctx.SetConnectionClose()
}

// answerUserinfo is the 400 for a request that names userinfo in its target or Host. Userinfo
// has no place in a request to a server (RFC 9110 §4.2.4); passed on, it could become
// credentials the client never sent as such. The connection is closed after it.
func answerUserinfo(ctx *fasthttp.RequestCtx) {
	r := answer(ctx, fasthttp.StatusBadRequest, reasonBadRequest)
	r.AppendBodyString("malformed request: userinfo in the target or Host\n")
	ctx.SetConnectionClose()
}
