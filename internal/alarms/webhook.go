package alarms

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

const (
	webhookTimeout  = 2 * time.Second
	webhookTries    = 4
	webhookInFlight = 8
)

// webhook delivers alarm bodies in the background: at most webhookInFlight at a time, each with
// a few tries and exponential backoff, each try bounded by webhookTimeout. It is safe for
// concurrent use.
type webhook struct {
	log    *slog.Logger
	poster Poster
	sem    chan struct{}
	wg     sync.WaitGroup
}

func newWebhook(poster Poster, log *slog.Logger) *webhook {
	if poster == nil {
		poster = HTTPPoster{Client: &http.Client{Timeout: webhookTimeout}}
	}
	return &webhook{log: log, poster: poster, sem: make(chan struct{}, webhookInFlight)}
}

// send encodes alarm and delivers it to url in the background; with no url it does nothing.
// busy names the alarm in the line logged when too many deliveries are in flight.
func (w *webhook) send(url string, alarm any, busy ...any) {
	if url == "" {
		return
	}
	body, err := json.Marshal(alarm)
	if err != nil {
		w.log.Error("alarm encoding failed", "err", err)
		return
	}
	select {
	case w.sem <- struct{}{}:
	default:
		w.log.Warn("alarm webhook busy; alarm not delivered", busy...)
		return
	}
	w.wg.Add(1)
	go func() {
		defer func() { <-w.sem; w.wg.Done() }()
		w.deliver(url, body)
	}()
}

// deliver posts body with exponential backoff, a few tries, each bounded by webhookTimeout.
func (w *webhook) deliver(url string, body []byte) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxElapsedTime = 0
	err := backoff.Retry(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
		defer cancel()
		return w.poster.Post(ctx, url, body)
	}, backoff.WithMaxRetries(bo, webhookTries-1))
	if err != nil {
		w.log.Warn("alarm webhook failed", "err", err, "tries", webhookTries)
	}
}

// wait waits for the deliveries in flight.
func (w *webhook) wait() { w.wg.Wait() }
