package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"pollbal/internal/metric"
)

// ownReasonList holds the X-Pollbal-Reason values of every answer the proxy makes itself. Each
// has its pollbal_responses_total series from the start (a test checks that every reason
// constant of the package is here). It is a read-only table.
var ownReasonList = [...]string{
	reasonNoApp, reasonPoolExhausted, reasonQueueFull, reasonQueueTimeout,
	reasonBodyTooLarge, reasonBackendUnreachable, reasonBackendTimeout, reasonBadResponse,
	reasonBadRequest, reasonHeadersTooLarge, reasonRequestTimeout, reasonMethodNotAllowed,
	reasonUpgradeUnsupported, reasonInternalError,
}

// ownReasons returns ownReasonList as a slice of its own.
func ownReasons() []string { return append([]string(nil), ownReasonList[:]...) }

// Stages of pollbal_client_gone_total.
const (
	goneQueued     = "queued"     // the client left while its request waited in the queue
	goneForwarding = "forwarding" // the client left while its request was with a backend
)

// answerMetrics count the answers the proxy makes itself, by reason, and the requests whose
// client went away before any answer; children resolved once. It is safe for concurrent use.
type answerMetrics struct {
	byReason       map[string]prometheus.Counter // pollbal_responses_total by X-Pollbal-Reason
	requestTimeout prometheus.Counter            // the scanner's 408, written outside fasthttp
	goneQueued     prometheus.Counter
	goneForwarding prometheus.Counter
}

func newAnswerMetrics(reg prometheus.Registerer) (*answerMetrics, error) {
	responses := metric.Counters("pollbal_responses_total",
		"Answers pollbal made itself (not a backend's), by the reason it sent in X-Pollbal-Reason.",
		"reason")
	gone := metric.Counters("pollbal_client_gone_total",
		"Requests whose client went away before they were answered, by stage: queued (left the queue) or forwarding (while a backend had the request); they are not in pollbal_requests_total.",
		"stage")
	m := &answerMetrics{
		byReason:       make(map[string]prometheus.Counter, len(ownReasons())),
		goneQueued:     gone.WithLabelValues(goneQueued),
		goneForwarding: gone.WithLabelValues(goneForwarding),
	}
	for _, r := range ownReasons() {
		m.byReason[r] = responses.WithLabelValues(r)
	}
	m.requestTimeout = m.byReason[reasonRequestTimeout]
	if err := metric.Register(reg, responses, gone); err != nil {
		return nil, fmt.Errorf("register answer metrics: %w", err)
	}
	return m, nil
}

// count counts an answer pollbal made itself, with status code and header h. It counts it under
// the reason it carries in X-Pollbal-Reason (one of ownReasons; every such answer is an error,
// so anything below 400 costs one comparison). The caller never passes a backend's answer here.
func (m *answerMetrics) count(code int, h *fasthttp.ResponseHeader) {
	if code < fasthttp.StatusBadRequest {
		return
	}
	if c := m.byReason[string(h.Peek(headerReason))]; c != nil {
		c.Inc()
	}
}
