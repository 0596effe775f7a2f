package proxy

// bufferResponseBody is the largest response body read whole before it is passed on: the
// common small answer is read in one go, its backend connection and lease are free before the
// client has it, and nothing is streamed. Larger bodies, and bodies of unknown length, are
// streamed through a fixed-size buffer (stream.go).
const bufferResponseBody = 64 << 10

// bodyPlan is how a client request's body is forwarded.
type bodyPlan uint8

const (
	bodyBuffered bodyPlan = iota // read whole first: the request may be retried on another backend
	bodyStreamed                 // forwarded as it arrives: never retried once sent
	bodyProbe                    // chunked: read up to the buffer limit to find out
	bodyTooLarge                 // over proxy.max_request_body: 413, nothing forwarded
)

// planRequestBody decides how to forward a request body of contentLength bytes (-1: chunked,
// length unknown) given proxy.buffer_request_body and proxy.max_request_body (0: no limit).
func planRequestBody(contentLength, buffer, limit int) bodyPlan {
	switch {
	case contentLength < 0:
		return bodyProbe
	case limit > 0 && contentLength > limit:
		return bodyTooLarge
	case contentLength <= buffer:
		return bodyBuffered
	}
	return bodyStreamed
}

// respPlan is how a backend's response body is passed to the client.
type respPlan uint8

const (
	respNoBody   respPlan = iota // HEAD, 204, 304: the header is all
	respBuffer                   // read whole (up to bufferResponseBody), then answered
	respStream                   // streamed to the client as it arrives
	respUnusable                 // 101 to a request pollbal did not forward as an upgrade: 502
)

// planResponse decides from a final response's status (1xx other than 101 have been skipped),
// whether the request was HEAD, and the response's Content-Length (-1: chunked, -2: until the
// backend closes).
func planResponse(status int, head bool, contentLength int) respPlan {
	switch {
	case status == 101:
		return respUnusable
	case head || status == 204 || status == 304 || status < 200:
		return respNoBody
	case contentLength >= 0 && contentLength <= bufferResponseBody:
		return respBuffer
	}
	return respStream
}
