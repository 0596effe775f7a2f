package balancer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"pollbal/configs"
)

// Poster delivers one alarm body to the webhook URL.
type Poster interface {
	Post(ctx context.Context, url string, body []byte) error
}

// HTTPPoster posts JSON with net/http; any 2xx is success.
type HTTPPoster struct{ Client *http.Client }

// Post sends body to url.
func (p HTTPPoster) Post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// Alarm is the JSON body POSTed to alarms.webhook.
type Alarm struct {
	Alarm   string    `json:"alarm"` // pool_exhausted
	Site    string    `json:"site"`
	Pool    string    `json:"pool"`
	App     string    `json:"app"`
	Service string    `json:"service"`
	Time    time.Time `json:"time"`
}

const (
	webhookTimeout  = 2 * time.Second
	webhookTries    = 4
	webhookInFlight = 8
)

// alarms deduplicates pool_exhausted alarms and pool_fallback log lines by (pool, app, service)
// within the dedup window and delivers alarms to the webhook in the background. It is safe for
// concurrent use.
type alarms struct {
	log    *slog.Logger
	now    func() time.Time
	events *Events
	poster Poster

	mu        sync.Mutex
	cfg       configs.Alarms
	lastAlarm map[[3]string]time.Time
	lastFall  map[[3]string]time.Time

	sem chan struct{}
	wg  sync.WaitGroup
}

func newAlarms(cfg configs.Alarms, poster Poster, log *slog.Logger, now func() time.Time, events *Events) *alarms {
	if poster == nil {
		poster = HTTPPoster{Client: &http.Client{Timeout: webhookTimeout}}
	}
	return &alarms{
		log: log, now: now, events: events, poster: poster, cfg: cfg,
		lastAlarm: map[[3]string]time.Time{},
		lastFall:  map[[3]string]time.Time{},
		sem:       make(chan struct{}, webhookInFlight),
	}
}

func (a *alarms) update(cfg configs.Alarms) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg = cfg
}

// due reports whether key is outside the dedup window in last, recording now when it is.
func (a *alarms) due(last map[[3]string]time.Time, key [3]string) bool {
	now := a.now()
	if t, ok := last[key]; ok && now.Sub(t) < a.cfg.DedupWindow {
		return false
	}
	last[key] = now
	return true
}

func (a *alarms) exhausted(site string, app *App) {
	webhook, due := a.dueAlarm([3]string{app.Pool, app.Name, app.Service})
	if !due {
		return
	}
	msg := fmt.Sprintf("pool %s has no available candidate for app %s (service %s)", app.Pool, app.Name, app.Service)
	a.log.Warn("pool_exhausted", "pool", app.Pool, "app", app.Name, "service", app.Service, "fallback_allowed", app.AllowFallback)
	a.events.Add("pool_exhausted", msg)
	a.send(webhook, Alarm{Alarm: "pool_exhausted", Site: site, Pool: app.Pool, App: app.Name, Service: app.Service, Time: a.now().UTC()},
		"pool", app.Pool, "app", app.Name)
}

// dueAlarm reports whether the alarm keyed key is outside the dedup window (recording now when
// it is) and the webhook to send it to ("" for none).
func (a *alarms) dueAlarm(key [3]string) (webhook string, due bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Webhook, a.due(a.lastAlarm, key)
}

// send encodes alarm and delivers it to webhook in the background, at most webhookInFlight at
// a time; with no webhook it does nothing. busy names the alarm in the line logged when too
// many deliveries are in flight.
func (a *alarms) send(webhook string, alarm any, busy ...any) {
	if webhook == "" {
		return
	}
	body, err := json.Marshal(alarm)
	if err != nil {
		a.log.Error("alarm encoding failed", "err", err)
		return
	}
	select {
	case a.sem <- struct{}{}:
	default:
		a.log.Warn("alarm webhook busy; alarm not delivered", busy...)
		return
	}
	a.wg.Add(1)
	go func() {
		defer func() { <-a.sem; a.wg.Done() }()
		a.deliver(webhook, body)
	}()
}

// deliver posts body with exponential backoff, a few tries, each bounded by webhookTimeout.
func (a *alarms) deliver(url string, body []byte) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxElapsedTime = 0
	err := backoff.Retry(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
		defer cancel()
		return a.poster.Post(ctx, url, body)
	}, backoff.WithMaxRetries(bo, webhookTries-1))
	if err != nil {
		a.log.Warn("alarm webhook failed", "err", err, "tries", webhookTries)
	}
}

func (a *alarms) fellBack(app *App) {
	key := [3]string{app.Pool, app.Name, app.Service}
	a.mu.Lock()
	due := a.due(a.lastFall, key)
	a.mu.Unlock()
	if !due {
		return
	}
	a.log.Info("pool_fallback", "pool", app.Pool, "app", app.Name, "service", app.Service, "served_from", configs.PoolDefault)
	a.events.Add("pool_fallback", fmt.Sprintf("app %s served from default: pool %s has no available candidate (service %s)", app.Name, app.Pool, app.Service))
}

// close waits for webhook deliveries in flight.
func (a *alarms) close() { a.wg.Wait() }

func (b *Balancer) exhausted(app *App) {
	app.counters.exhausted.Inc()
	b.alarms.exhausted(b.Snapshot().cfg.Site, app)
}

// Exhausted raises pool_exhausted (counted, the alarm deduplicated) for a request that is
// answered as for an exhausted pool although its first try found a candidate: every candidate
// it tried refused it as full (503 + X-Pool-Full). Acquire raises it only on a first try.
func (s *Snapshot) Exhausted(app *App) { s.bal.exhausted(app) }

func (b *Balancer) fellBack(app *App) {
	app.counters.fallback.Inc()
	b.alarms.fellBack(app)
}

// Close waits for alarm deliveries in flight. It is idempotent.
func (b *Balancer) Close() { b.alarms.close() }
