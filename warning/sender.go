package warning

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/defaults"
	"pollbal/internal/metric"
	"pollbal/protocol"
)

// maxResponseDrain bounds how much of a /pool_warning answer is read (to reuse the connection).
const maxResponseDrain = 4 << 10

// Target is one POST /pool_warning: the warned backend and the group it was warned for.
type Target struct {
	Backend string // backend id
	Address string // host:port
	Group   Group
}

// SenderOptions configures a Sender.
type SenderOptions struct {
	Site       string        // sent in X-Pollbal-Site and in the body; required
	Timeout    time.Duration // bounds each POST; must be > 0
	Secret     []byte        // nil or empty: requests are not signed
	Logger     *slog.Logger  // nil: discard
	Registerer prometheus.Registerer
	Now        func() time.Time // clock for X-Pollbal-Timestamp; nil: time.Now
}

// Sender POSTs /pool_warning to warned backends in the background. Each POST is bounded by the
// timeout, at most one POST per backend is in flight (a Send while the previous one is still
// running skips that backend), and a backend's delivery state is logged only when it changes.
// A Sender is safe for concurrent use and must not be copied.
type Sender struct {
	site   string
	logger *slog.Logger
	now    func() time.Time
	client *http.Client
	sent   *prometheus.CounterVec
	errs   *prometheus.CounterVec

	mu       sync.Mutex
	timeout  time.Duration
	secret   []byte
	inFlight map[flightKey]bool
	state    map[string]string // last logged delivery state per backend; absent = ok
	counted  map[string]bool   // backends with a pollbal_warning_errors_total series
	groups   map[groupKey]bool // groups with a pollbal_warnings_sent_total series
	keep     map[string]bool   // the backends to record; nil: every one (see Retain)
	closed   bool
	wg       sync.WaitGroup
}

// NewSender builds a Sender and registers its metrics with o.Registerer (when not nil):
// pollbal_warnings_sent_total{pool,service,version} and pollbal_warning_errors_total{backend}.
func NewSender(o SenderOptions) (*Sender, error) {
	if o.Site == "" {
		return nil, errors.New("new warning sender: site is empty")
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("new warning sender: timeout %v must be > 0", o.Timeout)
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Sender{
		site:   o.Site,
		logger: o.Logger,
		now:    o.Now,
		client: &http.Client{
			Transport: &http.Transport{
				// No Proxy: warnings go straight to the backend, whatever the environment says.
				DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
				MaxIdleConnsPerHost: 1,
				IdleConnTimeout:     90 * time.Second,
				DisableCompression:  true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		sent: metric.Counters("pollbal_warnings_sent_total",
			"POST /pool_warning requests answered with 2xx, by group.",
			"pool", "service", "version"),
		errs: metric.Counters("pollbal_warning_errors_total",
			"POST /pool_warning requests that failed (error, timeout or non-2xx), by backend.",
			"backend"),
		timeout:  o.Timeout,
		secret:   slices.Clone(o.Secret),
		inFlight: make(map[flightKey]bool),
		state:    make(map[string]string),
		counted:  make(map[string]bool),
		groups:   make(map[groupKey]bool),
	}
	if err := metric.Register(o.Registerer, s.sent, s.errs); err != nil {
		return nil, fmt.Errorf("new warning sender: register metrics: %w", err)
	}
	return s, nil
}

// Update applies a reloaded timeout and secret to the POSTs started from now on. A timeout
// <= 0 keeps the current one; a nil or empty secret turns signing off.
func (s *Sender) Update(timeout time.Duration, secret []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if timeout > 0 {
		s.timeout = timeout
	}
	s.secret = slices.Clone(secret)
}

// Retain forgets every backend not in keep (a reload removed it): its delivery state and its
// pollbal_warning_errors_total series. A POST to such a backend that is still in flight records
// nothing when it ends, so the series does not come back. keep is copied.
func (s *Sender) Retain(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = maps.Clone(keep)
	if s.keep == nil {
		s.keep = map[string]bool{}
	}
	for id := range s.state {
		if !keep[id] {
			delete(s.state, id)
		}
	}
	for id := range s.counted {
		if !keep[id] {
			s.errs.DeleteLabelValues(id)
			delete(s.counted, id)
		}
	}
	// The backends kept are known: their error series exist from now on, at 0 until a failure.
	for id := range s.keep {
		if !s.counted[id] {
			s.errs.WithLabelValues(id)
			s.counted[id] = true
		}
	}
}

// Expect makes the pollbal_warnings_sent_total series of each group that can be warned (its
// threshold is above 0), at 0 until a warning is sent: a group is known once a round has seen
// it, and a dashboard then shows that nothing was sent rather than no data.
func (s *Sender) Expect(groups []Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range groups {
		k := groupKey{g.Pool, g.Service, g.Version}
		if g.Threshold > 0 && !s.groups[k] {
			s.sent.WithLabelValues(g.Pool, g.Service, g.Version)
			s.groups[k] = true
		}
	}
}

// Send starts one POST per target in the background and returns at once. A target whose
// backend still has a POST in flight for the same group is skipped; a backend warned in two
// groups (two services) gets one POST per group, each with its own body and count. After
// Close, Send does nothing.
func (s *Sender) Send(targets []Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, t := range targets {
		k := keyOf(t)
		if s.inFlight[k] {
			s.logger.Debug("pool warning still in flight, skipped", "backend", t.Backend, "service", t.Group.Service)
			continue
		}
		s.inFlight[k] = true
		s.wg.Add(1)
		go s.post(t, s.timeout, s.secret)
	}
}

// Close stops accepting new sends, waits for the POSTs in flight (each bounded by the
// timeout), then closes idle connections. It is idempotent.
func (s *Sender) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.client.CloseIdleConnections()
}

func (s *Sender) post(t Target, timeout time.Duration, secret []byte) {
	defer s.wg.Done()
	err := s.do(t, timeout, secret)

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inFlight, keyOf(t))
	if err == nil {
		s.sent.WithLabelValues(t.Group.Pool, t.Group.Service, t.Group.Version).Inc()
	}
	if s.keep != nil && !s.keep[t.Backend] {
		return // removed from the configuration while the POST was in flight: forgotten
	}
	if err != nil {
		s.errs.WithLabelValues(t.Backend).Inc()
		s.counted[t.Backend] = true
	}
	prev, ok := s.state[t.Backend]
	if !ok {
		prev = stateOK
	}
	next := deliveryState(err)
	if next == prev {
		return
	}
	s.state[t.Backend] = next
	if err == nil {
		s.logger.Info("pool warning delivered again", "backend", t.Backend, "address", t.Address, "previous", prev)
	} else {
		s.logger.Warn("pool warning failed", "backend", t.Backend, "address", t.Address, "state", next, "err", err)
	}
}

// do sends one POST and reports whether it got a 2xx answer.
func (s *Sender) do(t Target, timeout time.Duration, secret []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	body := warningFor(t.Group, s.site).Body()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Address+protocol.PathWarning, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("pool warning %s: %w", t.Backend, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "pollbal")
	req.Header.Set(protocol.HeaderSite, s.site)
	if len(secret) > 0 {
		ts := strconv.FormatInt(s.now().Unix(), 10)
		req.Header.Set(protocol.HeaderTimestamp, ts)
		req.Header.Set(protocol.HeaderSignature, protocol.Sign(secret, ts, []byte(body)))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("pool warning %s: %w", t.Backend, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseDrain))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("pool warning %s: %w", t.Backend, &StatusError{Code: resp.StatusCode})
	}
	return nil
}

// warningFor is what the POST /pool_warning for g says.
func warningFor(g Group, site string) protocol.Warning {
	return protocol.Warning{Service: g.Service, Version: g.Version, Serving: len(g.Serving),
		Leaving: len(g.Leaving), Threshold: g.Threshold, Site: site}
}

// StatusError is a /pool_warning answer that is not 2xx.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("unexpected status %d", e.Code) }

const stateOK = "ok"

// deliveryState reduces a POST's outcome to a coarse state, so that a changing detail (a
// different port in a dial error) does not count as a change worth logging.
func deliveryState(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return stateOK
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &se):
		return "status " + strconv.Itoa(se.Code)
	default:
		return "unreachable"
	}
}

// flightKey identifies one POST: a backend and the group it is warned for.
type flightKey struct{ backend, pool, service, version string }

func keyOf(t Target) flightKey {
	return flightKey{t.Backend, t.Group.Pool, t.Group.Service, t.Group.Version}
}
