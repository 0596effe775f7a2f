package proxy

import (
	"bytes"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/balancer"
	"pollbal/configs"
	"pollbal/internal/accesslog"
	"pollbal/proxy/clientconn"
	"pollbal/proxy/upstream"
)

// logEntry is one request's access-log record, with what the data plane needs to finish it.
// A request takes one from the proxy's pool when it begins and fills it at a few points, each
// in one place:
//
//	beginEntry   the request's ID (always), and the request as it came (with the log on)
//	routed       the app it matched
//	tried        each backend an attempt leased (send, forward.go); queue_ms and upstream_ms there too
//	outcome      the forward's last outcome (forward)
//	finish       status, bytes and how it ended, when the handler answered it: logged, returned
//
// A response that outlives the handler takes the entry over, with the lease, and finishes it
// when its transfer ends: a streamed body (handOver, then TransferEnded from
// ResponseBody.Close) or an upgraded connection (startUpgrade, then upgradeSession.end). From
// then on the handler no longer touches it. One goroutine owns an entry at a time; it must
// not be copied.
type logEntry struct {
	rec accesslog.Record
	// on: the log was on when the request began, so its fields were filled and its line is
	// written. Off, only the request ID is kept (it is sent either way).
	on      bool
	start   time.Duration    // when the handler began, on p.clock
	began   time.Duration    // when the current attempt began, on p.clock: upstream_ms counts from it
	client  *clientconn.Conn // the client's tracked connection; nil outside pollbal's listeners
	upload  *uploadBody      // the request body when it is streamed; nil when buffered
	outcome outcome          // the forward's last outcome; outcomeOK when none ran
	// lease and metrics are the request's while its streamed body is sent (handOver): the end
	// of the transfer releases the one and records the request's duration in the other.
	p       *Proxy
	lease   balancer.Lease
	metrics *appRequests
	// relayTimedOut: the relay to an HTTP/1.0 client ran past proxy.client_timeout (relay.go).
	relayTimedOut bool
	id            [accesslog.NewRequestIDLen]byte // a request ID pollbal made
	ip            [64]byte                        // the client IP's text, when worked out here
	scratch       [64]byte                        // an X-Forwarded-For entry being parsed
}

// logEntries pools the entries. It is safe for concurrent use and must not be copied.
type logEntries struct{ pool sync.Pool }

func (l *logEntries) get() *logEntry {
	if e, ok := l.pool.Get().(*logEntry); ok {
		return e
	}
	return &logEntry{}
}

// put resets e, keeping the storage its record has grown, and pools it.
func (l *logEntries) put(e *logEntry) {
	e.rec.Reset()
	e.on, e.start, e.began, e.client, e.upload = false, 0, 0, nil, nil
	e.outcome, e.relayTimedOut = outcomeOK, false
	e.p, e.lease, e.metrics = nil, balancer.Lease{}, nil
	l.pool.Put(e)
}

// beginEntry takes the entry of a request the handler or the server is about to answer: its
// request ID, kept or made (and then set on the request, for the backend), and with the log on
// the request as it came, copied into the record before forwarding rewrites the request.
// start is when the request began, on p.clock.
func (p *Proxy) beginEntry(ctx *fasthttp.RequestCtx, cfg *configs.Config, start time.Duration) *logEntry {
	e := p.entries.get()
	e.p, e.start = p, start
	e.client = clientconn.Tracked(ctx.Conn())
	h := &ctx.Request.Header
	id, traceparent := requestIDs(h, &e.id)
	e.rec.RequestID = id
	if !p.alog.Enabled() {
		return e
	}
	e.on = true
	r := &e.rec
	r.Start = time.Now()
	r.TraceID, _ = accesslog.TraceID(traceparent)
	r.ClientIP = p.logClientIP(ctx, cfg, e)
	r.Method = h.Method()
	r.Host = ctx.Host()
	r.URI = pathAndQuery(h.RequestURI())
	r.Proto = viewBytes(protoOf(h))
	if v, sni, ok := e.client.TLS(); ok {
		r.TLSVersion, r.SNI = v, viewBytes(sni)
	} else if e.client == nil {
		// An HTTP/2 stream: its TLS connection is the HTTP/2 server's.
		if st := ctx.TLSConnectionState(); st != nil {
			r.TLSVersion, r.SNI = st.Version, viewBytes(st.ServerName)
		}
	}
	r.Referer, r.UserAgent = h.Referer(), h.UserAgent()
	r.Headers = p.alog.Headers()
	for _, lh := range r.Headers {
		r.HeaderValues = append(r.HeaderValues, h.Peek(lh.Name))
	}
	// The request's buffers change as it is forwarded, and a streamed or upgraded response
	// outlives them.
	r.OwnBytes()
	return e
}

// logClientIP is the client identity the log records (forwardedClient), as text in e.ip unless
// it is the tracked connection's own.
func (p *Proxy) logClientIP(ctx *fasthttp.RequestCtx, cfg *configs.Config, e *logEntry) []byte {
	client := requestClientIP(ctx, &e.ip)
	trusted := p.trust.get(cfg)
	if !client.TCP || !trusted.contains(client.IP) {
		return client.Text
	}
	var xff joined
	for k, v := range ctx.Request.Header.All() {
		if forwardedHeader(k) == fwdFor {
			xff.add(v, ",")
		}
	}
	ip := forwardedClient(client.IP, xff.bytes(), trusted, &e.scratch)
	if ip == client.IP {
		return client.Text
	}
	return ip.AppendTo(e.ip[:0])
}

// protoOf is a request's protocol version as the log writes it.
func protoOf(h *fasthttp.RequestHeader) string {
	switch {
	case h.IsHTTP11():
		return "HTTP/1.1"
	case string(h.Protocol()) == protoHTTP2:
		return protoHTTP2
	}
	return "HTTP/1.0"
}

// pathAndQuery is the path and query of a request target: the target itself in origin form
// ("/a?b"), what follows the authority in absolute form ("http://host/a?b"; "/" when nothing
// does), and "*" or an authority as they are.
func pathAndQuery(target []byte) []byte {
	if len(target) > 0 && target[0] == '/' {
		return target
	}
	i := bytes.Index(target, []byte("://"))
	if i < 0 {
		return target
	}
	rest := target[i+len("://"):]
	if j := bytes.IndexAny(rest, "/?"); j >= 0 {
		return rest[j:]
	}
	return viewBytes("/")
}

// routed records the app a request matched; nil (no app) records nothing. The pool is the
// app's resolved pool until an attempt leases a backend.
func (e *logEntry) routed(app *balancer.App) {
	if app == nil {
		return
	}
	r := &e.rec
	r.App, r.Service, r.Pool, r.Resolution = app.Name, app.Service, app.Pool, app.Resolution
}

// tried records a backend leased for an attempt: the request was sent to it (or is about to be).
func (e *logEntry) tried(l balancer.Lease) {
	r := &e.rec
	r.Attempts++
	r.Backend, r.BackendAddress, r.Pool, r.Fallback = l.Backend.ID, l.Backend.Address, l.Pool, l.Fallback
}

// finish ends the entry of a request the handler answered, took after it began: the answer
// gets the request's ID when it is pollbal's own (own; a backend's got it in relayResponse),
// and the line is logged. gone says that the client went away before any answer: the line has
// no status. The entry goes back to the pool.
func (p *Proxy) finish(ctx *fasthttp.RequestCtx, e *logEntry, took time.Duration, own, gone bool) {
	if own {
		setResponseID(&ctx.Response.Header, e.rec.RequestID)
	}
	if e.on {
		r := &e.rec
		if !gone {
			r.Status = ctx.Response.StatusCode()
			if own {
				r.Reason = ownReason(&ctx.Response.Header)
			}
		}
		r.BytesIn = requestBodyBytes(ctx, e.upload)
		r.BytesOut = responseBodyBytes(ctx)
		r.Duration = took
		r.End = endOf(e.outcome, own && !gone, upstream.TransferWhole, clientconn.TimedOut(e.client))
		p.alog.Log(r)
	}
	p.entries.put(e)
}

// handOver gives the entry to a streamed body, with the request's lease and its app's
// metrics: what the handler knows of it is recorded now (the status, the request body), the
// rest when its transfer ends (TransferEnded).
func (e *logEntry) handOver(ctx *fasthttp.RequestCtx, lease balancer.Lease, metrics *appRequests) {
	e.lease, e.metrics = lease, metrics
	e.recordAnswer(ctx)
}

// recordAnswer records what the handler knows of an answer that outlives it: its status and
// the request body read.
func (e *logEntry) recordAnswer(ctx *fasthttp.RequestCtx) {
	if e.on {
		e.rec.Status = ctx.Response.StatusCode()
		e.rec.BytesIn = requestBodyBytes(ctx, e.upload)
	}
}

// TransferEnded ends the request whose streamed body was sent, or broken off (BodyOwner): the
// lease goes back, the request's duration is recorded, and the entry is finished.
func (e *logEntry) TransferEnded(sent int64, t upstream.Transfer) {
	e.lease.Release()
	p := e.p
	now := p.clock.Now()
	e.metrics.Took(now - e.start)
	p.finishTransfer(e, now, 0, sent, t)
}

// finishTransfer ends the entry of a response whose transfer outlived the handler, now, on
// p.clock: out bytes of the response body were sent (and, for an upgraded connection, in
// bytes of the client's), and t says how the transfer ended. The entry goes back to the pool.
func (p *Proxy) finishTransfer(e *logEntry, now time.Duration, in, out int64, t upstream.Transfer) {
	if e.on {
		r := &e.rec
		r.BytesIn += in
		r.BytesOut = out
		r.Duration = now - e.start
		r.End = endOf(outcomeOK, false, t, e.relayTimedOut || clientconn.TimedOut(e.client))
		p.alog.Log(r)
	}
	p.entries.put(e)
}

// requestBodyBytes is how much of a request's body pollbal read: the streamed body's count, or
// the buffered body's length (0 for a body left unread as a stream).
func requestBodyBytes(ctx *fasthttp.RequestCtx, up *uploadBody) int64 {
	switch {
	case up != nil:
		return up.read
	case ctx.Request.IsBodyStream():
		return 0
	}
	return int64(len(ctx.Request.Body()))
}

// responseBodyBytes is the length of an answer's body as it is sent: none to a HEAD request.
func responseBodyBytes(ctx *fasthttp.RequestCtx) int64 {
	if ctx.IsHead() || ctx.Response.SkipBody {
		return 0
	}
	return int64(len(ctx.Response.Body()))
}

// ownReason is the reason an answer of pollbal's own carries in X-Pollbal-Reason, as one of
// the package's constants ("" for none).
func ownReason(h *fasthttp.ResponseHeader) string {
	v := h.Peek(headerReason)
	for _, r := range ownReasonList {
		if string(v) == r {
			return r
		}
	}
	return ""
}

// endOf is how a request ended, in the access log's words: who ended it. o is its forward's
// last outcome (outcomeOK when none ran or a backend answered), own says that pollbal answered
// it itself, t how a transfer that outlived the handler ended (TransferWhole otherwise), and
// timedOut that the client's connection was cut for proxy.client_timeout.
//
// The client comes first: a request whose client went away (or was cut off) ended with it,
// whatever pollbal then answered into the void. Then the backend: a timeout (504, or a body
// cut off), a failure (502, a body broken off). Then pollbal: every other answer it made
// itself is refused (404, 405, 400, 413, 501, 503…; its reason says why). Else the response
// went out whole: ok, or upgrade_closed for an upgraded connection.
func endOf(o outcome, own bool, t upstream.Transfer, timedOut bool) accesslog.End {
	switch {
	case t == upstream.TransferUpgradeClosed:
		return accesslog.EndUpgradeClosed
	case o == outcomeClientGone || o == outcomeLeftQueue || t == upstream.TransferClientGone:
		if timedOut {
			return accesslog.EndClientTimeout
		}
		return accesslog.EndClientGone
	case o == outcomeTimeout || t == upstream.TransferBackendTimeout:
		return accesslog.EndBackendTimeout
	case o == outcomeNotSent || o == outcomeConnFailed || o == outcomeBadResponse ||
		t == upstream.TransferBackendError:
		return accesslog.EndBackendError
	case own:
		return accesslog.EndRefused
	}
	return accesslog.EndOK
}
