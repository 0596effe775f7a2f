package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// apiState is the part of pollbal's GET /api/state that the demo reads.
type apiState struct {
	Site     string       `json:"site"`
	Ready    bool         `json:"ready"`
	Backends []apiBackend `json:"backends"`
}

type apiBackend struct {
	ID       string      `json:"id"`
	Pool     string      `json:"pool"`
	Ready    bool        `json:"ready"`
	Reason   string      `json:"reason"`
	Reports  []apiReport `json:"reports"`
	InFlight int64       `json:"in_flight"`
	Ejected  bool        `json:"ejected"`
	Warned   bool        `json:"warned"`
}

type apiReport struct {
	Service string `json:"service"`
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Report statuses as pollbal shows them (ok is reported as serving).
const (
	statusServing = "serving"
	statusLeaving = "leaving"
)

// getJSON decodes the JSON answer of a GET on url into out.
func getJSON(ctx context.Context, client *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("get %s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("get %s: decode: %w", url, err)
	}
	return nil
}

// report returns the backend's report of service, if it has one.
func (b apiBackend) report(service string) (apiReport, bool) {
	for _, r := range b.Reports {
		if r.Service == service {
			return r, true
		}
	}
	return apiReport{}, false
}

// poolCount is how many ready backends of one pool report the service, by status.
type poolCount struct {
	Serving, Leaving int
}

// countPools counts, for each of pools, the ready backends that report service as serving
// or leaving. A pool without such backends is present with zero counts.
func countPools(s apiState, service string, pools []string) map[string]poolCount {
	out := make(map[string]poolCount, len(pools))
	for _, p := range pools {
		out[p] = poolCount{}
	}
	for _, b := range s.Backends {
		c, tracked := out[b.Pool]
		if !tracked || !b.Ready || b.Ejected {
			continue
		}
		r, ok := b.report(service)
		if !ok {
			continue
		}
		switch r.Status {
		case statusServing:
			c.Serving++
		case statusLeaving:
			c.Leaving++
		}
		out[b.Pool] = c
	}
	return out
}

// allOn reports whether every backend in ids is ready and reports service serving version.
func allOn(s apiState, service, version string, ids []string) bool {
	for _, id := range ids {
		i := slices.IndexFunc(s.Backends, func(b apiBackend) bool { return b.ID == id })
		if i < 0 {
			return false
		}
		b := s.Backends[i]
		r, ok := b.report(service)
		if !b.Ready || !ok || r.Status != statusServing || r.Version != version {
			return false
		}
	}
	return true
}

// poolMin is the lowest count seen for one pool over a run.
type poolMin struct {
	Pool      string
	Threshold int
	// Serving is the fewest ready backends reporting serving in one sample.
	Serving int
	// InService is the fewest ready backends reporting serving or leaving (both take
	// traffic) in one sample.
	InService int
	// LeavingAtMin is how many were leaving in the sample where Serving was lowest.
	LeavingAtMin int
}

// tracker keeps the per-pool minimums over the samples it observes. It is not safe for
// concurrent use.
type tracker struct {
	service string
	mins    []poolMin
	samples int
}

func newTracker(service string, threshold int, pools []string) *tracker {
	t := &tracker{service: service}
	for _, p := range pools {
		t.mins = append(t.mins, poolMin{Pool: p, Threshold: threshold})
	}
	return t
}

// observe folds one sample into the minimums.
func (t *tracker) observe(s apiState) {
	pools := make([]string, len(t.mins))
	for i, m := range t.mins {
		pools[i] = m.Pool
	}
	counts := countPools(s, t.service, pools)
	for i := range t.mins {
		m := &t.mins[i]
		c := counts[m.Pool]
		if t.samples == 0 || c.Serving < m.Serving {
			m.Serving, m.LeavingAtMin = c.Serving, c.Leaving
		}
		if t.samples == 0 || c.Serving+c.Leaving < m.InService {
			m.InService = c.Serving + c.Leaving
		}
	}
	t.samples++
}

// result returns a copy of the minimums and the number of samples they cover.
func (t *tracker) result() ([]poolMin, int) {
	return slices.Clone(t.mins), t.samples
}
