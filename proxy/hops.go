package proxy

import (
	"slices"

	"github.com/valyala/fasthttp"
)

// hopKind tells which side of the proxy a header name must not cross.
type hopKind uint8

const (
	hopNone       hopKind = iota
	hopBoth               // hop-by-hop in both directions (RFC 9110 §7.6.1)
	hopConnection         // Connection itself: hop-by-hop, and it names more hop-by-hop headers
	hopRequest            // request only: Expect, which pollbal has already met by reading the body
	hopUpgrade            // Upgrade: hop-by-hop in both directions; on a request, maybe an upgrade (upgrade.go)
)

// headerClass is what the forward path does with a header name: its hop-by-hop kind, and its
// client-identity kind (forwarded.go). A name has at most one of them.
type headerClass struct {
	hop hopKind
	fwd forwardedKind
}

// classedHeaders are the header names with a class; every other name is end-to-end and left
// alone. Proxy-Connection is not standard but is what old clients send instead of Connection;
// every common proxy drops it. It is a read-only table.
var classedHeaders = [...]struct {
	name  string
	class headerClass
}{
	{"Connection", headerClass{hop: hopConnection}},
	{"Keep-Alive", headerClass{hop: hopBoth}},
	{"Proxy-Connection", headerClass{hop: hopBoth}},
	{"TE", headerClass{hop: hopBoth}},
	{"Trailer", headerClass{hop: hopBoth}},
	{"Transfer-Encoding", headerClass{hop: hopBoth}},
	{"Proxy-Authenticate", headerClass{hop: hopBoth}},
	{"Proxy-Authorization", headerClass{hop: hopBoth}},
	{"Upgrade", headerClass{hop: hopUpgrade}},
	{"Expect", headerClass{hop: hopRequest}},
	{headerForwardedFor, headerClass{fwd: fwdFor}},
	{headerForwardedHost, headerClass{fwd: fwdHost}},
	{headerForwardedProto, headerClass{fwd: fwdProto}},
	{headerRealIP, headerClass{fwd: fwdRealIP}},
	{headerForwarded, headerClass{fwd: fwdForwarded}},
}

// classedByLength indexes classedHeaders by name length, so that a name is compared with the
// (at most two) classed names of its length only: entry n holds their positions plus one, 0
// when unused. It is a read-only table, built once.
var classedByLength = indexClassedHeaders()

// maxClassedSameLength is how many classed names may share a length.
const maxClassedSameLength = 2

func indexClassedHeaders() (idx [20][maxClassedSameLength]uint8) {
	for i, h := range classedHeaders {
		slots := &idx[len(h.name)] // out of range: a longer name needs a larger array
		free := slices.Index(slots[:], 0)
		if free < 0 {
			panic("proxy: more classed header names of one length than maxClassedSameLength")
		}
		slots[free] = uint8(i + 1)
	}
	return idx
}

// classifyHeader is the class of a header name, ignoring ASCII case.
func classifyHeader(key []byte) headerClass {
	if len(key) >= len(classedByLength) {
		return headerClass{}
	}
	for _, i := range classedByLength[len(key)] {
		if i == 0 {
			break
		}
		if h := &classedHeaders[i-1]; equalFold(key, h.name) {
			return h.class
		}
	}
	return headerClass{}
}

// hopHeader is the hop-by-hop kind of a header name.
func hopHeader(key []byte) hopKind { return classifyHeader(key).hop }

// isHop reports whether a header of this kind is dropped in this direction.
func isHop(kind hopKind, request bool) bool {
	return kind == hopBoth || kind == hopConnection || kind == hopUpgrade || (kind == hopRequest && request)
}

// hopSet collects the exact names of the headers to delete from one header block: hop-by-hop
// ones, and (on requests) the X-Forwarded-* ones pollbal replaces. The names are copied, so the
// block can be modified afterwards. As a local variable it stays on the stack: it holds arrays
// and offsets, never a slice of itself (which would make the compiler move it to the heap).
// A pathological block, with more names or longer values than the arrays hold, spills to heap
// slices. It is a per-call value, not safe for concurrent use.
type hopSet struct {
	n        int                // names recorded
	ends     [maxHops]uint16    // end offset of each name in names
	names    [hopNamesSize]byte // names, back to back
	spilled  bool
	bigNames [][]byte // every name, once spilled

	conn    joined // the values of every Connection header
	upgrade bool   // an Upgrade header was seen
}

const (
	maxHops      = 16
	hopNamesSize = 256
)

func (s *hopSet) add(key []byte) {
	if !s.spilled {
		used := 0
		if s.n > 0 {
			used = int(s.ends[s.n-1])
		}
		if s.n < maxHops && used+len(key) <= hopNamesSize {
			copy(s.names[used:], key)
			s.ends[s.n] = uint16(used + len(key))
			s.n++
			return
		}
		for i := 0; i < s.n; i++ {
			s.bigNames = append(s.bigNames, append([]byte(nil), s.key(i)...))
		}
		s.spilled = true
	}
	s.bigNames = append(s.bigNames, append([]byte(nil), key...))
	s.n++
}

func (s *hopSet) len() int { return s.n }

func (s *hopSet) key(i int) []byte {
	if s.spilled {
		return s.bigNames[i]
	}
	start := 0
	if i > 0 {
		start = int(s.ends[i-1])
	}
	return s.names[start:s.ends[i]]
}

// see records key, a header of hop-by-hop kind kind (hopHeader), if it is hop-by-hop in this
// direction, and collects the values of Connection headers. Callers run it over every header of
// a block, then, when namesOthers says so, run seeNamed over the block once more.
func (s *hopSet) see(key, value []byte, kind hopKind, request bool) {
	if !isHop(kind, request) {
		return
	}
	switch kind {
	case hopConnection:
		s.conn.add(value, ",")
	case hopUpgrade:
		s.upgrade = true
	}
	s.add(key)
}

// namesOthers reports whether the Connection values name a header beyond the standard
// hop-by-hop ones (and the "close" option).
func (s *hopSet) namesOthers(request bool) bool {
	for v := s.conn.bytes(); len(v) > 0; {
		var tok []byte
		tok, v = nextToken(v)
		if len(tok) > 0 && !equalFold(tok, "close") && !isHop(hopHeader(tok), request) {
			return true
		}
	}
	return false
}

// seeNamed records key if a Connection header names it and see did not record it already,
// and reports whether it did.
func (s *hopSet) seeNamed(key []byte, request bool) bool {
	if isHop(hopHeader(key), request) {
		return false
	}
	for v := s.conn.bytes(); len(v) > 0; {
		var tok []byte
		tok, v = nextToken(v)
		if len(tok) > 0 && equalFold(key, tok) {
			s.add(key)
			return true
		}
	}
	return false
}

// stripResponseHeaders removes from a backend's response, before it goes to the client, the
// hop-by-hop headers and any X-Pollbal-* or X-Request-Id header: those are pollbal's to set
// (the caller sets X-Pollbal-Backend, X-Pollbal-Pool and the request's ID), and a backend's
// own would pass for pollbal's word (a forged X-Pollbal-Reason, say, or an ID the log does
// not know). Most responses have none and cost one pass over the
// headers, which only classifies the names; the headers are collected and deleted
// (stripHeaders) only when there is one. A backend's "Connection: close" is about the backend
// connection, which the round trip has already handled; the client connection stays as the
// client asked.
func stripResponseHeaders(h *fasthttp.ResponseHeader) {
	for k := range h.All() {
		if isHop(hopHeader(k), false) || ownHeader(k) {
			stripHeaders(h)
			break
		}
	}
	h.ResetConnectionClose()
}

// ownHeader reports whether a response header name is pollbal's to set: its own X-Pollbal-
// family, and X-Request-Id; ignoring ASCII case.
func ownHeader(key []byte) bool {
	return len(key) >= len(headerOwnPrefix) && equalFold(key[:len(headerOwnPrefix)], headerOwnPrefix) ||
		len(key) == len(headerRequestID) && equalFold(key, headerRequestID)
}

// stripHeaders deletes a response's hop-by-hop, X-Pollbal-* and X-Request-Id headers: those
// named so, and, in a second pass that runs only when Connection names a header that is not
// one of the standard hop-by-hop names, those it names.
//
// The loops range over h.All() directly (here and in prepareRequest), not through a shared
// iter.Seq2 parameter: that lets the compiler keep the hopSet on the stack.
func stripHeaders(h *fasthttp.ResponseHeader) {
	var s hopSet
	for k, v := range h.All() {
		if ownHeader(k) {
			s.add(k)
			continue
		}
		s.see(k, v, hopHeader(k), false)
	}
	if s.namesOthers(false) {
		for k := range h.All() {
			s.seeNamed(k, false)
		}
	}
	for i := 0; i < s.len(); i++ {
		h.DelBytes(s.key(i))
	}
}

// joined accumulates header values, joined by a separator, in a fixed array; past it, it
// spills to a heap slice. Like hopSet it never points into itself, so it can live on the stack;
// it is a per-call value, not safe for concurrent use.
type joined struct {
	n       int
	arr     [joinedSize]byte
	spilled bool
	big     []byte
}

const joinedSize = 256

func (j *joined) add(v []byte, sep string) {
	if !j.spilled {
		need := len(v)
		if j.n > 0 {
			need += len(sep)
		}
		if j.n+need <= joinedSize {
			if j.n > 0 {
				j.n += copy(j.arr[j.n:], sep)
			}
			j.n += copy(j.arr[j.n:], v)
			return
		}
		j.big = append([]byte(nil), j.arr[:j.n]...)
		j.spilled = true
	}
	if len(j.big) > 0 {
		j.big = append(j.big, sep...)
	}
	j.big = append(j.big, v...)
}

func (j *joined) bytes() []byte {
	if j.spilled {
		return j.big
	}
	return j.arr[:j.n]
}

// nextToken splits the first comma-separated, space-trimmed element off a header value; tok
// may be empty (",,"). It is a plain function rather than an iterator so that values taken from
// a stack hopSet do not escape.
func nextToken(v []byte) (tok, rest []byte) {
	i := 0
	for i < len(v) && v[i] != ',' {
		i++
	}
	tok = trimSpace(v[:i])
	if i < len(v) {
		i++
	}
	return tok, v[i:]
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold reports whether b equals s in ASCII case-insensitive comparison.
func equalFold[T string | []byte](b []byte, s T) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
