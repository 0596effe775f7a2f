package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/internal/metrictest"
	"pollbal/internal/testproc"
)

// A streamed response's request duration ends with its last byte, not when the handler returns
// with the body still to come: a slow backend sends 10 pieces 20 ms apart (chunked, so the body
// is streamed), and the duration pollbal records must cover the time from the response header
// reaching the client to the backend starting to send its last piece. The request is counted once.
func TestStreamedResponseDurationEndsWithLastByte(t *testing.T) {
	const pieces, gap = 10, 20 * time.Millisecond
	lastPiece := make(chan time.Time, 1)
	be := startBackend(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			tick := time.NewTicker(gap)
			defer tick.Stop()
			for i := range pieces {
				if i > 0 {
					<-tick.C // a slow backend: one piece per gap
				}
				if i == pieces-1 {
					lastPiece <- time.Now() // before it is sent: pollbal cannot have written it yet
				}
				_, _ = w.WriteString("piece\n")
				if err := w.Flush(); err != nil {
					return
				}
			}
		})
	})
	cfg := configtest.New([]configs.App{{Name: "shop", Hosts: []string{"shop.test"}}}, []configs.Backend{{ID: "b1", Address: be.addr}}, tieBreakID)

	e := newEnv(t, cfg, "b1")

	rc := dialRaw(t, e.ln, nil)
	if _, err := rc.c.Write([]byte("GET /slow HTTP/1.1\r\nHost: shop.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	headerAt := time.Now()
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(body) != pieces*len("piece\n") {
		t.Fatalf("answer %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
	stream := (<-lastPiece).Sub(headerAt)
	if stream < (pieces-2)*gap {
		t.Fatalf("the stream lasted %v after the header, want at least %v: the backend was not slow", stream, (pieces-2)*gap)
	}

	var count float64
	testproc.WaitFor(t, 10*time.Second, "the request's duration to be recorded", func() bool {
		count, _ = metrictest.Value(t, e.reg, `pollbal_request_duration_seconds{app="shop"}`)
		return count > 0
	})
	// metrictest reads a histogram's count; its sum comes from the series itself.
	var h dto.Metric
	if err := e.p.requests.vecs.durations.WithLabelValues("shop").(prometheus.Metric).Write(&h); err != nil {
		t.Fatal(err)
	}
	took := h.GetHistogram().GetSampleSum()
	if count != 1 {
		t.Errorf("%v durations recorded, want 1", count)
	}
	if got := time.Duration(took * float64(time.Second)); got < stream {
		t.Errorf("recorded duration %v, want at least the %v the body streamed after the header", got, stream)
	}
	if n, _ := metrictest.Value(t, e.reg, `pollbal_requests_total{app="shop",code="200"}`); n != 1 {
		t.Errorf("pollbal_requests_total{app=shop,code=200} = %v, want 1", n)
	}
}
