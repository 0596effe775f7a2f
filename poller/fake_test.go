package poller

import (
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"pollbal/protocol"
)

// fakeTransport answers every target's GET /pool from a script, without sockets: inside a
// testing/synctest bubble a check then takes no time and starts at the exact time its timer
// fired, so scheduling tests compare exact durations. Safe for concurrent use.
type fakeTransport struct {
	mu      sync.Mutex
	scripts map[string]*fakeScript // by target address
	release chan struct{}          // closed to end every held answer
}

// fakeScript is one address's answers (the last one repeats) and when each check came.
type fakeScript struct {
	steps []step
	next  int
	at    []time.Time
}

// newFakeTransport scripts the answers per address; it must be built inside the bubble that
// uses it. Only a step's status, body, load and hold are used.
func newFakeTransport(scripts map[string][]step) *fakeTransport {
	f := &fakeTransport{scripts: map[string]*fakeScript{}, release: make(chan struct{})}
	for addr, steps := range scripts {
		f.scripts[addr] = &fakeScript{steps: steps}
	}
	return f
}

func (f *fakeTransport) RoundTrip(hc *fasthttp.HostClient, _ *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	f.mu.Lock()
	sc := f.scripts[hc.Addr]
	sc.at = append(sc.at, time.Now())
	s := sc.steps[min(sc.next, len(sc.steps)-1)]
	sc.next++
	f.mu.Unlock()
	if s.hold {
		<-f.release
	}
	if s.status == 0 {
		s.status = fasthttp.StatusOK
	}
	resp.SetStatusCode(s.status)
	if s.load != "" {
		resp.Header.Set(protocol.HeaderLoad, s.load)
	}
	resp.SetBodyString(s.body)
	return false, nil
}

// hits returns when each check of addr started, as offsets from began.
func (f *fakeTransport) hits(addr string, began time.Time) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, at := range f.scripts[addr].at {
		out = append(out, at.Sub(began))
	}
	return out
}

// unblock ends every held answer, now and later.
func (f *fakeTransport) unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}
