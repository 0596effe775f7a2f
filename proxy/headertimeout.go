package proxy

import (
	"io"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/internal/accesslog"
	"pollbal/proxy/clientconn"
)

// headerTimedOut answers a client connection whose request headers came too late (they began
// at since, on p.clock) with 408 request_timeout, counts the request and logs it. The listener
// calls it (Hooks.HeaderTimedOut) and closes the connection after.
func (p *Proxy) headerTimedOut(c *clientconn.Conn, since time.Duration) {
	p.requests.noApp.Count(fasthttp.StatusRequestTimeout)
	p.answers.requestTimeout.Inc()
	e := p.entries.get()
	id := accesslog.AppendNewRequestID(e.id[:0], nil)
	c.WriteAnswer(func(w io.Writer) { writeHeaderTimeout(w, id) })
	if p.alog.Enabled() {
		took := p.clock.Now() - since
		r := &e.rec
		r.Start = time.Now().Add(-took)
		r.RequestID, r.ClientIP = id, c.Client().Text
		if v, sni, ok := c.TLS(); ok {
			r.TLSVersion, r.SNI = v, viewBytes(sni)
		}
		r.Status, r.Reason, r.End, r.Duration = fasthttp.StatusRequestTimeout, reasonRequestTimeout, accesslog.EndRefused, took
		p.alog.Log(r)
	}
	p.entries.put(e)
}

// writeHeaderTimeout writes the 408 request_timeout answer for headers that came too late,
// with the request ID pollbal gave it.
func writeHeaderTimeout(w io.Writer, requestID []byte) {
	var r fasthttp.Response
	r.SetStatusCode(fasthttp.StatusRequestTimeout)
	r.Header.SetContentType(textPlain)
	r.Header.Set(headerReason, reasonRequestTimeout)
	setResponseID(&r.Header, requestID)
	r.SetConnectionClose()
	r.SetBodyString("request headers not received in time\n")
	_, _ = r.WriteTo(w)
}
