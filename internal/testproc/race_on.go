//go:build race

package testproc

// Race is true when the tests run under the race detector, so that a test can build the
// processes it starts with -race too, or loosen an allocation guard that sync.Pool defeats.
const Race = true
