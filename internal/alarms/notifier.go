package alarms

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"pollbal/configs"
	"pollbal/internal/defaults"
)

// Alarm names, the "alarm" field of their webhook bodies and the kind of their events.
const (
	AlarmPoolExhausted    = "pool_exhausted"
	AlarmStoreUnavailable = "store_unavailable"
)

// Alarm is the JSON body POSTed to alarms.webhook when an app's pool has no available
// candidate.
type Alarm struct {
	Alarm   string    `json:"alarm"` // pool_exhausted
	Site    string    `json:"site"`
	Pool    string    `json:"pool"`
	App     string    `json:"app"`
	Service string    `json:"service"`
	Time    time.Time `json:"time"`
}

// StoreAlarm is the JSON body POSTed to alarms.webhook when the store cannot be reached.
type StoreAlarm struct {
	Alarm  string `json:"alarm"` // store_unavailable
	Site   string `json:"site"`
	Reason string `json:"reason"`
	Time   string `json:"time"`
}

// Options configure a Notifier.
type Options struct {
	Config *configs.Config // validated: site and the alarms section
	Events *Events         // where alarms and fallbacks are listed; nil: a ring of the Notifier's own
	Poster Poster          // optional; where alarms are POSTed (default: HTTP)
	Logger *slog.Logger
	Now    func() time.Time // optional; default time.Now
}

// Notifier raises the alarms and notes the fallbacks that the balancer and the store report:
// pool_exhausted alarms and pool_fallback log lines are deduplicated by (pool, app, service),
// store_unavailable alarms on their own, each within alarms.dedup_window. It satisfies the
// balancer's Observer and the store's Alarms without either importing this package. It is safe
// for concurrent use; its methods never block on the webhook.
type Notifier struct {
	log     *slog.Logger
	now     func() time.Time
	events  *Events
	webhook *webhook

	mu        sync.Mutex // guards the fields below
	site      string
	cfg       configs.Alarms
	lastAlarm map[[3]string]time.Time
	lastFall  map[[3]string]time.Time
}

// New builds a Notifier for a validated configuration.
func New(o Options) (*Notifier, error) {
	if o.Config == nil {
		return nil, errors.New("alarms: nil config")
	}
	o.Logger = defaults.Logger(o.Logger)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Events == nil {
		o.Events = NewEvents(defaultEvents, o.Now)
	}
	return &Notifier{
		log: o.Logger, now: o.Now, events: o.Events, webhook: newWebhook(o.Poster, o.Logger),
		site: o.Config.Site, cfg: o.Config.Alarms,
		lastAlarm: map[[3]string]time.Time{},
		lastFall:  map[[3]string]time.Time{},
	}, nil
}

// Update applies a reloaded configuration's alarms section.
func (n *Notifier) Update(cfg *configs.Config) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.site, n.cfg = cfg.Site, cfg.Alarms
}

// Events returns the ring the Notifier lists its alarms and fallbacks in.
func (n *Notifier) Events() *Events { return n.events }

// due reports whether key is outside the dedup window in last, recording now when it is. The
// caller holds mu.
func (n *Notifier) due(last map[[3]string]time.Time, key [3]string) bool {
	now := n.now()
	if t, ok := last[key]; ok && now.Sub(t) < n.cfg.DedupWindow {
		return false
	}
	last[key] = now
	return true
}

// dueAlarm reports whether the alarm keyed key is outside the dedup window (recording now when
// it is), with the site and the webhook to send it to ("" for none).
func (n *Notifier) dueAlarm(key [3]string) (site, webhook string, due bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.site, n.cfg.Webhook, n.due(n.lastAlarm, key)
}

// Exhausted raises pool_exhausted for a request of app (service, its resolved pool) that found
// no available candidate: logged, listed and POSTed, once per dedup window and key.
func (n *Notifier) Exhausted(pool, app, service string, fallbackAllowed bool) {
	site, webhook, due := n.dueAlarm([3]string{pool, app, service})
	if !due {
		return
	}
	n.log.Warn(AlarmPoolExhausted, "pool", pool, "app", app, "service", service, "fallback_allowed", fallbackAllowed)
	n.events.Add(AlarmPoolExhausted, fmt.Sprintf("pool %s has no available candidate for app %s (service %s)", pool, app, service))
	n.webhook.send(webhook, Alarm{Alarm: AlarmPoolExhausted, Site: site, Pool: pool, App: app, Service: service, Time: n.now().UTC()},
		"pool", pool, "app", app)
}

// FellBack notes a request of app served from default because its pool had no available
// candidate: logged and listed once per dedup window and key, never an alarm.
func (n *Notifier) FellBack(pool, app, service string) {
	n.mu.Lock()
	due := n.due(n.lastFall, [3]string{pool, app, service})
	n.mu.Unlock()
	if !due {
		return
	}
	n.log.Info("pool_fallback", "pool", pool, "app", app, "service", service, "served_from", configs.PoolDefault)
	n.events.Add("pool_fallback", fmt.Sprintf("app %s served from default: pool %s has no available candidate (service %s)", app, pool, service))
}

// StoreUnavailable raises store_unavailable: logged, listed and POSTed, once per dedup window.
func (n *Notifier) StoreUnavailable(why string) {
	site, webhook, due := n.dueAlarm([3]string{AlarmStoreUnavailable})
	if !due {
		return
	}
	n.log.Warn(AlarmStoreUnavailable, "err", why)
	n.events.Add(AlarmStoreUnavailable, "the shared store of moves cannot be reached: "+why)
	n.webhook.send(webhook, StoreAlarm{Alarm: AlarmStoreUnavailable, Site: site, Reason: why, Time: n.now().UTC().Format("2006-01-02T15:04:05Z07:00")},
		"alarm", AlarmStoreUnavailable)
}

// Close waits for the webhook deliveries in flight. It is idempotent.
func (n *Notifier) Close() { n.webhook.wait() }
