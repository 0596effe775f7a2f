package accesslog

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxURI is how much of a request's path and query a line holds.
const MaxURI = 2048

// Time layouts: RFC 3339 in UTC with milliseconds (JSON), NGINX's $time_local (combined).
const (
	jsonTime     = "2006-01-02T15:04:05.000Z07:00"
	combinedTime = "02/Jan/2006:15:04:05 -0700"
)

// AppendJSON appends r as one JSON object and a newline to dst; the fields that do not apply
// are left out (see Record). Strings are escaped by hand: quotes, backslashes and control bytes
// as JSON escapes, each byte that is not part of valid UTF-8 as \ufffd. It allocates nothing
// when dst has room for the line.
func AppendJSON(dst []byte, r *Record) []byte {
	o := jsonObject{b: append(dst, '{')}
	if !r.Start.IsZero() {
		o.key("time")
		o.b = append(o.b, '"')
		o.b = r.Start.UTC().AppendFormat(o.b, jsonTime)
		o.b = append(o.b, '"')
	}
	o.bytes("request_id", r.RequestID)
	o.bytes("trace_id", r.TraceID)
	o.bytes("client_ip", r.ClientIP)
	o.bytes("method", r.Method)
	o.bytes("host", r.Host)
	o.bytes("uri", cutURI(r.URI))
	o.bytes("proto", r.Proto)
	if r.TLSVersion != 0 {
		o.key("tls")
		o.b = append(o.b, `{"version":"`...)
		o.b = appendTLSVersion(o.b, r.TLSVersion)
		o.b = append(o.b, '"')
		if len(r.SNI) > 0 {
			o.b = append(o.b, `,"sni":`...)
			o.b = appendJSONString(o.b, r.SNI)
		}
		o.b = append(o.b, '}')
	}
	if r.Status != 0 {
		o.key("status")
		o.b = strconv.AppendInt(o.b, int64(r.Status), 10)
	}
	o.int("bytes_in", r.BytesIn)
	o.int("bytes_out", r.BytesOut)
	o.millis("duration_ms", r.Duration)
	if r.Upstream > 0 {
		o.millis("upstream_ms", r.Upstream)
	}
	scheduled := r.App != ""
	if scheduled {
		o.millis("queue_ms", r.Queue)
	}
	o.string("app", r.App)
	o.string("service", r.Service)
	o.string("pool", r.Pool)
	o.string("resolution", r.Resolution)
	if scheduled {
		o.key("fallback")
		o.b = strconv.AppendBool(o.b, r.Fallback)
	}
	o.string("backend", r.Backend)
	o.string("backend_address", r.BackendAddress)
	if scheduled {
		o.int("attempts", int64(r.Attempts))
		o.int("refusals", int64(r.Refusals))
	}
	o.string("reason", r.Reason)
	o.string("end", r.End.String())
	for i, h := range r.Headers {
		if i < len(r.HeaderValues) && len(r.HeaderValues[i]) > 0 {
			// A Header's Field comes from the configuration: escaped like any string.
			o.b = append(o.b, ',')
			o.b = appendJSONString(o.b, h.Field)
			o.b = append(o.b, ':')
			o.b = appendJSONString(o.b, r.HeaderValues[i])
		}
	}
	return append(o.b, '}', '\n')
}

// jsonObject appends the members of one JSON object, a comma before all but the first.
type jsonObject struct {
	b    []byte
	more bool
}

// key appends the member's name, which must need no escaping (the log's own names).
func (o *jsonObject) key(name string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, '"', ':')
}

// bytes appends a string member, left out when v is empty.
func (o *jsonObject) bytes(name string, v []byte) {
	if len(v) == 0 {
		return
	}
	o.key(name)
	o.b = appendJSONString(o.b, v)
}

// string appends a string member, left out when v is empty.
func (o *jsonObject) string(name, v string) {
	if v == "" {
		return
	}
	o.key(name)
	o.b = appendJSONString(o.b, v)
}

func (o *jsonObject) int(name string, v int64) {
	o.key(name)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) millis(name string, d time.Duration) {
	o.key(name)
	o.b = appendMillis(o.b, d)
}

// cutURI is the part of a request's path and query that a line holds.
func cutURI(uri []byte) []byte {
	if len(uri) > MaxURI {
		return uri[:MaxURI]
	}
	return uri
}

// Hex digits: lower case for IDs and JSON escapes, upper case for NGINX's \xHH.
const (
	hexDigits      = "0123456789abcdef"
	upperHexDigits = "0123456789ABCDEF"
)

// appendJSONString appends s as a quoted JSON string. Quotes, backslashes and control bytes are
// escaped, U+2028 and U+2029 too (JavaScript reads them as line ends), and each byte that is
// not part of valid UTF-8 becomes \ufffd, as encoding/json does.
func appendJSONString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		// A conversion this short that does not escape is copied to the stack, not allocated.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendMillis appends d in milliseconds with up to three decimals and no trailing zeros
// (12.5, 0.042, 0); a negative d (a clock that stepped back) is 0.
func appendMillis(dst []byte, d time.Duration) []byte {
	us := (d + time.Microsecond/2) / time.Microsecond
	if d <= 0 || us == 0 {
		return append(dst, '0')
	}
	dst = strconv.AppendInt(dst, int64(us/1000), 10)
	frac := int(us % 1000)
	if frac == 0 {
		return dst
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

// appendTLSVersion appends a TLS version as "1.2", "1.3"; one pollbal does not know as hex.
func appendTLSVersion(dst []byte, v uint16) []byte {
	if v >= 0x0301 && v <= 0x0304 {
		return append(dst, '1', '.', byte('0'+v-0x0301))
	}
	return append(dst, '0', 'x', hexDigits[v>>12], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
}

// AppendCombined appends r as NGINX's combined line followed by pollbal's own fields, and a
// newline, to dst:
//
//	$remote_addr - - [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rid=… app=… pool=… backend=… attempts=… queue_ms=… duration_ms=… end=…
//
// The time is the request's start in UTC. As NGINX does, a value that is empty is "-" and bytes
// that could break the line (quotes, backslashes, control bytes and bytes above 0x7e) are written
// as \xHH; in the key=value fields a space is too. It allocates nothing when dst has room.
func AppendCombined(dst []byte, r *Record) []byte {
	dst = appendCombinedField(dst, r.ClientIP, true)
	dst = append(dst, " - - ["...)
	dst = r.Start.UTC().AppendFormat(dst, combinedTime)
	dst = append(dst, "] \""...)
	if len(r.Method) == 0 {
		dst = append(dst, '-')
	} else {
		dst = appendCombinedField(dst, r.Method, false)
		dst = append(dst, ' ')
		dst = appendCombinedField(dst, cutURI(r.URI), false)
		dst = append(dst, ' ')
		dst = appendCombinedField(dst, r.Proto, false)
	}
	dst = append(dst, "\" "...)
	status := max(0, min(r.Status, 999))
	dst = append(dst, byte('0'+status/100), byte('0'+status/10%10), byte('0'+status%10), ' ')
	dst = strconv.AppendInt(dst, max(r.BytesOut, 0), 10)
	dst = append(dst, " \""...)
	dst = appendCombinedField(dst, r.Referer, false)
	dst = append(dst, "\" \""...)
	dst = appendCombinedField(dst, r.UserAgent, false)
	dst = append(dst, "\" rid="...)
	dst = appendCombinedField(dst, r.RequestID, true)
	dst = append(dst, " app="...)
	dst = appendCombinedField(dst, r.App, true)
	dst = append(dst, " pool="...)
	dst = appendCombinedField(dst, r.Pool, true)
	dst = append(dst, " backend="...)
	dst = appendCombinedField(dst, r.Backend, true)
	dst = append(dst, " attempts="...)
	dst = strconv.AppendInt(dst, int64(r.Attempts), 10)
	dst = append(dst, " queue_ms="...)
	dst = appendMillis(dst, r.Queue)
	dst = append(dst, " duration_ms="...)
	dst = appendMillis(dst, r.Duration)
	dst = append(dst, " end="...)
	dst = append(dst, r.End.String()...)
	return append(dst, '\n')
}

// appendCombinedField appends one value of a combined line: "-" when empty, else the bytes with
// '"', '\', control bytes and bytes above 0x7e (and a space, when unquoted) written as \xHH.
func appendCombinedField[T string | []byte](dst []byte, s T, unquoted bool) []byte {
	if len(s) == 0 {
		return append(dst, '-')
	}
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0x20 && c < 0x7f && c != '"' && c != '\\' || c == ' ' && !unquoted {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, '\\', 'x', upperHexDigits[c>>4], upperHexDigits[c&0xf])
		start = i + 1
	}
	return append(dst, s[start:]...)
}
