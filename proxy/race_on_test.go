//go:build race

package proxy

// raceEnabled: the race detector makes sync.Pool drop items at random, so fasthttp's pooled
// buffers are reallocated now and then and allocation counts are not meaningful.
const raceEnabled = true
