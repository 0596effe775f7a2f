package proxy

import (
	"errors"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/proxy/clientconn"
)

// wait queues a request that found no candidate (proxy.queue_timeout; balancer/queue.go) and
// returns the lease it was handed, which may come from a newer snapshot than snap, the
// request's. The client's connection is checked while it waits: a client that went away leaves
// the queue at once.
func (p *Proxy) wait(ctx *fasthttp.RequestCtx, snap *balancer.Snapshot, app *balancer.App) (balancer.Lease, error) {
	conn := ctx.Conn()
	return p.bal.Wait(snap, app, func() bool { return clientconn.Gone(conn) })
}

// queueOutcome maps an error of balancer.Wait to an outcome.
func queueOutcome(err error) outcome {
	switch {
	case errors.Is(err, balancer.ErrQueueFull):
		return outcomeQueueFull
	case errors.Is(err, balancer.ErrQueueTimeout):
		return outcomeQueueTimeout
	case errors.Is(err, balancer.ErrGone):
		return outcomeLeftQueue
	}
	return outcomeNoCandidate
}
