package main

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// monitor samples pollbal's /api/state on a ticker, folds every sample into the per-pool
// minimums and keeps the latest one for the live view. It is safe for concurrent use and must
// not be copied.
type monitor struct {
	client *http.Client
	url    string
	every  time.Duration

	mu       sync.Mutex
	tr       *tracker
	latest   *apiState
	failures int
}

func newMonitor(client *http.Client, admin string, every time.Duration, tr *tracker) *monitor {
	return &monitor{client: client, url: "http://" + admin + "/api/state", every: every, tr: tr}
}

// Run samples until ctx ends, and once more at the start.
func (m *monitor) Run(ctx context.Context) error {
	tick := time.NewTicker(m.every)
	defer tick.Stop()
	for {
		m.sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (m *monitor) sample(ctx context.Context) {
	var s apiState
	err := getJSON(ctx, m.client, m.url, &s)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			m.failures++
		}
		return
	}
	m.latest = &s
	m.tr.observe(s)
}

// state returns the latest sample, or nil before the first one.
func (m *monitor) state() *apiState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.latest
}

// result returns the per-pool minimums, the samples they cover and the failed samples.
func (m *monitor) result() (mins []poolMin, samples, failures int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mins, samples = m.tr.result()
	return mins, samples, m.failures
}
