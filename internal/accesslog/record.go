package accesslog

import (
	"time"

	"pollbal/configs"
)

// End is how a request ended. The zero End is EndOK.
type End uint8

// The ends of a request, each written as its String in the end field.
const (
	// EndOK: the response was sent whole.
	EndOK End = iota
	// EndClientGone: the client closed its connection before the response was sent whole.
	EndClientGone
	// EndClientTimeout: the client sent or accepted no byte for proxy.client_timeout.
	EndClientTimeout
	// EndBackendTimeout: the backend did not answer (or went silent) within backend_timeout.
	EndBackendTimeout
	// EndBackendError: the backend could not be reached or broke the response.
	EndBackendError
	// EndRefused: pollbal answered itself (404 no_app, 503 pool_exhausted, 413…); Reason says why.
	EndRefused
	// EndUpgradeClosed: an upgraded (WebSocket) connection closed.
	EndUpgradeClosed

	endCount // the number of Ends; not one itself
)

var endNames = [endCount]string{
	EndOK:             "ok",
	EndClientGone:     "client_gone",
	EndClientTimeout:  "client_timeout",
	EndBackendTimeout: "backend_timeout",
	EndBackendError:   "backend_error",
	EndRefused:        "refused",
	EndUpgradeClosed:  "upgrade_closed",
}

// String is the End as the log writes it; an End out of range is "unknown".
func (e End) String() string {
	if e < endCount {
		return endNames[e]
	}
	return "unknown"
}

// Header is one request header the log records: Name to look it up in the request, Field the
// name of its field in a JSON line. A plain value.
type Header struct {
	Name  string
	Field string
}

// HeadersOf returns the Headers for the configured header names (access_log.headers).
func HeadersOf(names []string) []Header {
	if len(names) == 0 {
		return nil
	}
	out := make([]Header, len(names))
	for i, n := range names {
		out[i] = Header{Name: n, Field: configs.AccessLogField(n)}
	}
	return out
}

// Record is what the log knows of one request. The data plane keeps one per request context,
// fills it while it serves the request, hands it to Logger.Log when the request ends and Resets
// it for the next one. The byte-slice fields may point into the server's request buffers: Log
// copies what it writes before it returns, so they need to stay valid only until then (see
// OwnBytes for a request whose line is written after its buffers are reused). A Record is not
// safe for concurrent use.
//
// A field that does not apply is absent from a JSON line; which zero value means absent is
// said on each field. The scheduling fields (queue_ms, fallback, attempts, refusals) are written
// whenever App is set — as 0 and false when no backend was tried — and absent otherwise.
type Record struct {
	// Start is when the request's first byte came in: the time field, and where Duration
	// counts from. Zero: absent.
	Start time.Time
	// RequestID is the X-Request-Id the request kept or was given. Empty: absent.
	RequestID []byte
	// TraceID is the trace-id of a valid traceparent (see TraceID). Empty: absent.
	TraceID []byte
	// ClientIP is the client identity pollbal forwards. Empty: absent.
	ClientIP []byte
	// Method, Host, URI (path and query, cut at 2,048 bytes when written) and Proto (HTTP/1.1)
	// of the request. Empty: absent.
	Method, Host, URI, Proto []byte
	// TLSVersion is the connection's TLS version (crypto/tls's VersionTLS12…); 0 for plain
	// HTTP, when the tls field is absent. SNI is the server name the client sent, if any.
	TLSVersion uint16
	SNI        []byte
	// Status is the status sent to the client. 0 (none was sent): absent.
	Status int
	// BytesIn and BytesOut count the request and response bodies. Always written.
	BytesIn, BytesOut int64
	// Duration is from the first byte in to the last byte out. Always written.
	Duration time.Duration
	// Upstream is the backend's time to its response head. 0 (no response head): absent.
	Upstream time.Duration
	// Queue is how long the request waited for a slot; written as 0 when it did not wait.
	Queue time.Duration
	// App, Service, Pool (the pool that served the request, or the resolved pool when no
	// backend was tried) and Resolution (explicit, owner or default). Empty: absent.
	App, Service, Pool, Resolution string
	// Fallback is true when the default pool served the request after a fallback.
	Fallback bool
	// Backend (id) and BackendAddress of the last backend tried. Empty: absent.
	Backend, BackendAddress string
	// Attempts counts the backends tried; Refusals the X-Pool-Full answers skipped.
	Attempts, Refusals int
	// Reason is the X-Pollbal-Reason of an answer pollbal made itself. Empty: absent. A record
	// with a Reason is always logged.
	Reason string
	// End is how the request ended. Always written.
	End End
	// Referer and UserAgent are the request's headers of those names, for the combined format.
	Referer, UserAgent []byte
	// Headers are the configured headers (Logger.Headers at the request's start) and
	// HeaderValues their values in the request, index for index; an empty value is absent.
	Headers      []Header
	HeaderValues [][]byte

	own []byte // OwnBytes' storage, reused
}

// Reset clears r for the next request, keeping the storage it has grown.
func (r *Record) Reset() {
	values := r.HeaderValues
	clear(values) // drop the references into the last request's buffers
	own := r.own
	*r = Record{HeaderValues: values[:0], own: own[:0]}
}

// OwnBytes copies every byte-slice field into storage r owns and reuses, so that r stays
// valid after the request's buffers are reused: an upgraded connection, logged when it closes,
// calls it once the request has been forwarded. It allocates only when r's storage must grow.
func (r *Record) OwnBytes() {
	fields := r.byteFields()
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	for _, v := range r.HeaderValues {
		n += len(v)
	}
	// One growth at most, before any copy: a later append never moves what was copied.
	own := r.own[:0]
	if cap(own) < n {
		own = make([]byte, 0, n)
	}
	keep := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		start := len(own)
		own = append(own, b...)
		return own[start:len(own):len(own)]
	}
	for _, f := range fields {
		*f = keep(*f)
	}
	for i, v := range r.HeaderValues {
		r.HeaderValues[i] = keep(v)
	}
	r.own = own
}

// byteFields lists r's byte-slice fields but HeaderValues.
func (r *Record) byteFields() [10]*[]byte {
	return [10]*[]byte{&r.RequestID, &r.TraceID, &r.ClientIP, &r.Method, &r.Host, &r.URI, &r.Proto,
		&r.SNI, &r.Referer, &r.UserAgent}
}
