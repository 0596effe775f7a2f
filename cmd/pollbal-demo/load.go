package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"pollbal/protocol"
)

// maxFailureExamples bounds the failures kept for the summary.
const maxFailureExamples = 5

// load sends a steady stream of GET / requests through pollbal, one Host per app in turn,
// and counts the outcomes. A request fails when it gets no answer or a non-2xx one. It is
// safe for concurrent use and must not be copied.
type load struct {
	client *http.Client
	url    string
	hosts  []string
	every  time.Duration
	start  time.Time

	served atomic.Int64
	failed atomic.Int64

	mu       sync.Mutex
	examples []string
}

func newLoad(client *http.Client, proxy string, hosts []string, rate int, start time.Time) *load {
	return &load{
		client: client, url: "http://" + proxy + "/", hosts: hosts,
		every: time.Second / time.Duration(rate), start: start,
	}
}

// Run sends requests until ctx ends, then waits for the ones in flight: a request is never
// cut short by the demo stopping, so it cannot be miscounted as failed.
func (l *load) Run(ctx context.Context) error {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		host := l.hosts[i%len(l.hosts)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.one(host)
		}()
	}
}

func (l *load) one(host string) {
	req, err := http.NewRequest(http.MethodGet, l.url, nil)
	if err != nil {
		l.fail(host, err.Error())
		return
	}
	req.Host = host
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail(host, err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		reason := resp.Header.Get(protocol.HeaderReason)
		l.fail(host, fmt.Sprintf("%d %s", resp.StatusCode, reason))
		return
	}
	l.served.Add(1)
}

func (l *load) fail(host, what string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.examples) < maxFailureExamples {
		l.examples = append(l.examples, fmt.Sprintf("t+%.1fs Host %s: %s", time.Since(l.start).Seconds(), host, what))
	}
}

// counts returns the requests served and failed so far.
func (l *load) counts() (served, failed int64) { return l.served.Load(), l.failed.Load() }

// failures returns the first few failures.
func (l *load) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.examples...)
}
