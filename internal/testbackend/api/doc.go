// Package api is the JSON the example backend (internal/testbackend) answers on its own
// endpoints, GET /_backend/stats and GET /_backend/streams: the backend writes these types, and
// the tests and the demo that run it read them.
package api
