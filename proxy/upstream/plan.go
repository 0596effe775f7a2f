package upstream

// bufferResponseBody is the largest response body read whole before it is passed on: the
// common small answer is read in one go, its backend connection and lease are free before the
// client has it, and nothing is streamed. Larger bodies, and bodies of unknown length, are
// streamed through a fixed-size buffer (stream.go).
const bufferResponseBody = 64 << 10

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
