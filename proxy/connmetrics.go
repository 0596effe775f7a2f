package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metric"
)

// connMetrics are the client connections' metrics, children resolved once. It is safe for
// concurrent use.
type connMetrics struct {
	acceptErrors prometheus.Counter
	refused      prometheus.Counter

	headerTimeouts, clientTimeouts, idleTimeouts prometheus.Counter
	upgradeIdleTimeouts                          prometheus.Counter

	tlsHandshakeErrors prometheus.Counter
}

// newConnMetrics registers the connection metrics; open is read for the connections gauge,
// upgraded for the upgraded connections gauge.
func newConnMetrics(reg prometheus.Registerer, open, upgraded func() float64) (*connMetrics, error) {
	timeouts := metric.Counters("pollbal_client_timeouts_total",
		"Client connections closed by a timeout: header (408 request_timeout), client (no byte moved during a request), idle (keep-alive) or upgrade_idle (an upgraded connection without traffic for proxy.upgrade_idle_timeout).",
		"kind")
	m := &connMetrics{
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pollbal_accept_errors_total",
			Help: "Accepts of client connections that failed (out of descriptors, of buffers…); serving goes on after a short back-off.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pollbal_client_connections_refused_total",
			Help: "Client connections closed at once because proxy.max_connections were open.",
		}),
		tlsHandshakeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pollbal_tls_handshake_errors_total",
			Help: "TLS handshakes on the TLS listener that failed or did not finish within proxy.header_timeout; a connection closed before sending a byte is not counted. They are not requests.",
		}),
		headerTimeouts: timeouts.WithLabelValues("header"),
		clientTimeouts: timeouts.WithLabelValues("client"),
		idleTimeouts:   timeouts.WithLabelValues("idle"),

		upgradeIdleTimeouts: timeouts.WithLabelValues("upgrade_idle"),
	}
	gauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pollbal_client_connections",
		Help: "Client connections open now.",
	}, open)
	upgradedGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pollbal_upgraded_connections",
		Help: "Upgraded (WebSocket) connections open now; each holds its backend's slot.",
	}, upgraded)
	if err := metric.Register(reg, m.acceptErrors, m.refused, m.tlsHandshakeErrors, timeouts, gauge, upgradedGauge); err != nil {
		return nil, fmt.Errorf("register connection metrics: %w", err)
	}
	return m, nil
}
