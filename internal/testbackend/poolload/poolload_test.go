package poolload

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestLimiter(t *testing.T) {
	lim := New(2)
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	app := lim.Limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = w.Write([]byte("ok"))
	}))
	pool := lim.Report(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("web\n")) }))

	poolValue := func() string {
		rec := httptest.NewRecorder()
		pool.ServeHTTP(rec, httptest.NewRequest("GET", "/pool", nil))
		return rec.Header().Get(HeaderLoad)
	}
	if got := poolValue(); got != "0/2" {
		t.Fatalf("idle: X-Pool-Load %q, want 0/2", got)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			app.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			codes[i] = rec.Code
		}()
	}
	<-entered
	<-entered
	if got := poolValue(); got != "2/2" {
		t.Fatalf("two in progress: X-Pool-Load %q, want 2/2", got)
	}
	rec := httptest.NewRecorder()
	app.ServeHTTP(rec, httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(HeaderFull) == "" || len(entered) != 0 {
		t.Fatalf("third: %d %v (handler entered: %d), want 503 with X-Pool-Full and no work done", rec.Code, rec.Header(), len(entered))
	}
	close(release)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("held requests answered %v, want 200s", codes)
	}
	if lim.InFlight() != 0 || lim.Peak() != 2 || lim.Refused() != 1 || poolValue() != "0/2" {
		t.Fatalf("after: in flight %d peak %d refused %d value %q; want 0, 2, 1, 0/2", lim.InFlight(), lim.Peak(), lim.Refused(), poolValue())
	}
	if got := New(0).Value(); got != "0" {
		t.Fatalf("without a capacity: %q, want 0", got)
	}
}

// TestLimiterNeverPassesCapacity hammers a Limiter of capacity 3 from many goroutines: the peak
// never passes 3 and the count returns to 0.
func TestLimiterNeverPassesCapacity(t *testing.T) {
	lim := New(3)
	app := lim.Limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				app.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			}
		}()
	}
	wg.Wait()
	if lim.Peak() > 3 || lim.InFlight() != 0 {
		t.Fatalf("peak %d in flight %d, want <= 3 and 0", lim.Peak(), lim.InFlight())
	}
}
