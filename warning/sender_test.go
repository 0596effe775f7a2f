package warning

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/internal/metrictest"
	"pollbal/internal/secretfile"
	"pollbal/internal/testproc"
)

// wait blocks until every POST started so far has finished. Tests call it only after their
// Send calls have returned, which keeps the WaitGroup usage valid.
func (s *Sender) wait() { s.wg.Wait() }

// received is one request as a test server saw it.
type received struct {
	method, path string
	header       http.Header
	body         string
}

// recordingServer answers every request with code after recording it on the channel.
func recordingServer(t *testing.T, code int) (*httptest.Server, chan received) {
	t.Helper()
	ch := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(b)}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func addr(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// closedAddr returns a 127.0.0.1 address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

func newTestSender(t *testing.T, o SenderOptions) (*Sender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	if o.Site == "" {
		o.Site = "test-site"
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	s, err := NewSender(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, reg
}

var testGroup = Group{Pool: "pool-a", Service: "web", Version: "v3", Threshold: 2,
	Serving: []string{"b1", "b2"}, Leaving: []string{"b3"}, Warned: []string{"b1", "b2"}}

func TestSenderRequest(t *testing.T) {
	fixed := time.Unix(1_700_000_123, 0)
	tests := []struct {
		name      string
		secret    []byte
		wantSig   bool
		wantTS    string
		wantGroup Group
		wantBody  string
	}{
		{
			name:     "unsigned",
			wantBody: "web v3 serving=2 leaving=1 threshold=2 site=test-site\n",
		},
		{
			name:     "signed",
			secret:   []byte("k3y"),
			wantSig:  true,
			wantTS:   "1700000123",
			wantBody: "web v3 serving=2 leaving=1 threshold=2 site=test-site\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, ch := recordingServer(t, http.StatusNoContent)
			s, reg := newTestSender(t, SenderOptions{Secret: tc.secret, Now: func() time.Time { return fixed }})
			s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
			var r received
			select {
			case r = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("no request received")
			}
			if r.method != http.MethodPost || r.path != "/pool_warning" {
				t.Errorf("request = %s %s, want POST /pool_warning", r.method, r.path)
			}
			if r.body != tc.wantBody {
				t.Errorf("body = %q, want %q", r.body, tc.wantBody)
			}
			if got := r.header.Get("Content-Type"); got != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", got)
			}
			if got := r.header.Get("X-Pollbal-Site"); got != "test-site" {
				t.Errorf("X-Pollbal-Site = %q", got)
			}
			ts, sig := r.header.Get("X-Pollbal-Timestamp"), r.header.Get("X-Pollbal-Signature")
			if !tc.wantSig {
				if ts != "" || sig != "" {
					t.Errorf("unsigned request carries timestamp %q signature %q", ts, sig)
				}
			} else {
				if ts != tc.wantTS {
					t.Errorf("X-Pollbal-Timestamp = %q, want %q", ts, tc.wantTS)
				}
				// Computed independently of protocol.Sign so a bug there cannot hide.
				want := hmacHex(tc.secret, ts+"\n"+tc.wantBody)
				if sig != "sha256="+want {
					t.Errorf("X-Pollbal-Signature = %q, want sha256=%s", sig, want)
				}
			}
			s.wait()
			labels := `{pool="pool-a",service="web",version="v3"}`
			if got, _ := metrictest.Value(t, reg, "pollbal_warnings_sent_total"+labels); got != 1 {
				t.Errorf("warnings_sent_total = %v, want 1", got)
			}
		})
	}
}

func TestSenderStatusCodes(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		wantSent float64
		wantErrs float64
	}{
		{name: "200 is success", code: http.StatusOK, wantSent: 1},
		{name: "202 is success", code: http.StatusAccepted, wantSent: 1},
		{name: "204 is success", code: http.StatusNoContent, wantSent: 1},
		{name: "302 is an error (redirects not followed)", code: http.StatusFound, wantErrs: 1},
		{name: "401 is an error", code: http.StatusUnauthorized, wantErrs: 1},
		{name: "500 is an error", code: http.StatusInternalServerError, wantErrs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, ch := recordingServer(t, tc.code)
			s, reg := newTestSender(t, SenderOptions{})
			s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
			s.wait()
			if len(ch) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(ch))
			}
			sent, _ := metrictest.Value(t, reg, `pollbal_warnings_sent_total{pool="pool-a",service="web",version="v3"}`)
			errs, _ := metrictest.Value(t, reg, `pollbal_warning_errors_total{backend="b1"}`)
			if sent != tc.wantSent || errs != tc.wantErrs {
				t.Fatalf("sent=%v errors=%v, want sent=%v errors=%v", sent, errs, tc.wantSent, tc.wantErrs)
			}
		})
	}
}

func TestSenderUnreachableCounted(t *testing.T) {
	s, reg := newTestSender(t, SenderOptions{})
	s.Send([]Target{{Backend: "gone", Address: closedAddr(t), Group: testGroup}})
	s.wait()
	if got, _ := metrictest.Value(t, reg, `pollbal_warning_errors_total{backend="gone"}`); got != 1 {
		t.Fatalf("warning_errors_total{backend=gone} = %v, want 1", got)
	}
}

// blockingServer holds every request until release is closed; arrivals are signalled.
func blockingServer(t *testing.T) (srv *httptest.Server, arrived chan struct{}, release chan struct{}) {
	t.Helper()
	arrived = make(chan struct{}, 16)
	release = make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		srv.Close()
	})
	return srv, arrived, release
}

func TestSenderTimeoutBoundsPostAndNeverBlocksCaller(t *testing.T) {
	srv, arrived, _ := blockingServer(t)
	const timeout = 200 * time.Millisecond
	s, reg := newTestSender(t, SenderOptions{Timeout: timeout})

	// The server never answers on its own; if Send waited for the POST this would hang.
	s.Send([]Target{{Backend: "slow", Address: addr(srv), Group: testGroup}})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("request never arrived")
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close waited %v for a POST bounded by %v", d, timeout)
	}
	if got, _ := metrictest.Value(t, reg, `pollbal_warning_errors_total{backend="slow"}`); got != 1 {
		t.Fatalf("timed-out POST not counted as error: %v", got)
	}
}

func TestSenderOneInFlightPerBackend(t *testing.T) {
	srv, arrived, release := blockingServer(t)
	other, otherCh := recordingServer(t, http.StatusNoContent)
	s, reg := newTestSender(t, SenderOptions{Timeout: 30 * time.Second})

	s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("first request never arrived")
	}
	// b1 is still in flight: skipped. b2 is independent: sent.
	s.Send([]Target{
		{Backend: "b1", Address: addr(srv), Group: testGroup},
		{Backend: "b2", Address: addr(other), Group: testGroup},
	})
	select {
	case <-otherCh:
	case <-time.After(10 * time.Second):
		t.Fatal("b2 not sent while b1 was in flight")
	}
	close(release)
	s.wait()
	if n := len(arrived); n != 0 {
		t.Fatalf("b1 got %d extra requests while one was in flight, want 0", n)
	}
	// Once the first finished, b1 can be warned again.
	s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
	s.wait()
	if n := len(arrived); n != 1 {
		t.Fatalf("b1 got %d requests after the first finished, want 1", n)
	}
	if got, _ := metrictest.Value(t, reg, `pollbal_warnings_sent_total{pool="pool-a",service="web",version="v3"}`); got != 3 {
		t.Fatalf("warnings_sent_total = %v, want 3", got)
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct{ testproc.Buffer }

func (l *logBuffer) lines() []string {
	s := strings.TrimSpace(l.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestSenderLogsOncePerChange(t *testing.T) {
	var code int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		c := code
		mu.Unlock()
		w.WriteHeader(c)
	}))
	t.Cleanup(srv.Close)
	logs := &logBuffer{}
	s, _ := newTestSender(t, SenderOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})

	steps := []struct {
		name      string
		code      int
		wantLines int    // total log lines after this step
		wantLast  string // substring of the last line
	}{
		{name: "first success logs nothing", code: 204, wantLines: 0},
		{name: "failure logs once", code: 500, wantLines: 1, wantLast: "pool warning failed"},
		{name: "same failure again logs nothing", code: 500, wantLines: 1, wantLast: "status 500"},
		{name: "different failure logs", code: 503, wantLines: 2, wantLast: "status 503"},
		{name: "recovery logs once", code: 200, wantLines: 3, wantLast: "pool warning delivered again"},
		{name: "success again logs nothing", code: 204, wantLines: 3, wantLast: "delivered again"},
	}
	for _, st := range steps {
		mu.Lock()
		code = st.code
		mu.Unlock()
		s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
		s.wait()
		lines := logs.lines()
		if len(lines) != st.wantLines {
			t.Fatalf("%s: %d log lines, want %d:\n%s", st.name, len(lines), st.wantLines, strings.Join(lines, "\n"))
		}
		if st.wantLast != "" && !strings.Contains(lines[len(lines)-1], st.wantLast) {
			t.Fatalf("%s: last log line %q does not contain %q", st.name, lines[len(lines)-1], st.wantLast)
		}
	}
}

func TestSenderUpdate(t *testing.T) {
	srv, ch := recordingServer(t, http.StatusNoContent)
	s, _ := newTestSender(t, SenderOptions{Secret: []byte("old")})
	tests := []struct {
		name    string
		secret  []byte
		wantKey string // "" = unsigned
	}{
		{name: "new secret signs", secret: []byte("new"), wantKey: "new"},
		{name: "nil secret stops signing", secret: nil, wantKey: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.Update(time.Second, tc.secret)
			s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
			s.wait()
			r := <-ch
			sig := r.header.Get("X-Pollbal-Signature")
			if tc.wantKey == "" {
				if sig != "" {
					t.Fatalf("signature %q after secret removed", sig)
				}
				return
			}
			ts := r.header.Get("X-Pollbal-Timestamp")
			if want := "sha256=" + hmacHex([]byte(tc.wantKey), ts+"\n"+r.body); sig != want {
				t.Fatalf("signature = %q, want %q", sig, want)
			}
		})
	}
}

func TestSenderCloseIdempotentAndSendAfterClose(t *testing.T) {
	srv, ch := recordingServer(t, http.StatusNoContent)
	s, err := NewSender(SenderOptions{Site: "s", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: testGroup}})
	s.wait()
	if len(ch) != 0 {
		t.Fatalf("Send after Close posted %d requests", len(ch))
	}
}

func TestNewSenderErrors(t *testing.T) {
	tests := []struct {
		name string
		opts SenderOptions
	}{
		{name: "empty site", opts: SenderOptions{Timeout: time.Second}},
		{name: "zero timeout", opts: SenderOptions{Site: "s"}},
		{name: "negative timeout", opts: SenderOptions{Site: "s", Timeout: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSender(tc.opts); err == nil {
				t.Fatal("NewSender() succeeded, want error")
			}
		})
	}
	t.Run("duplicate registration", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := NewSender(SenderOptions{Site: "s", Timeout: time.Second, Registerer: reg}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewSender(SenderOptions{Site: "s", Timeout: time.Second, Registerer: reg}); err == nil {
			t.Fatal("second NewSender on the same registry succeeded, want error")
		}
	})
}

// TestSenderAgainstExampleBackend checks the signature end to end with the example backend's
// own verification (a real process on 127.0.0.1).
func TestSenderAgainstExampleBackend(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "backend")
	if err := testproc.GoBuild(bin, "pollbal/internal/testbackend", false); err != nil {
		t.Fatalf("build example backend: %v", err)
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("shared-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "lock")
	backendAddr := startExampleBackend(t, bin, "-listen", "127.0.0.1:0", "-id", "ex", "-lock-file", lock, "-secret-file", secretFile)

	secret, err := secretfile.Read(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		secret   []byte
		wantLock bool
	}{
		{name: "wrong secret rejected, lock untouched", secret: []byte("wrong"), wantLock: false},
		{name: "unsigned rejected, lock untouched", secret: nil, wantLock: false},
		{name: "right secret accepted, lock touched", secret: secret, wantLock: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, reg := newTestSender(t, SenderOptions{Secret: tc.secret})
			s.Send([]Target{{Backend: "ex", Address: backendAddr, Group: testGroup}})
			s.wait()
			_, statErr := os.Stat(lock)
			if gotLock := statErr == nil; gotLock != tc.wantLock {
				t.Fatalf("lock exists = %v, want %v", gotLock, tc.wantLock)
			}
			errs, _ := metrictest.Value(t, reg, `pollbal_warning_errors_total{backend="ex"}`)
			if wantErrs := map[bool]float64{true: 0, false: 1}[tc.wantLock]; errs != wantErrs {
				t.Fatalf("errors = %v, want %v", errs, wantErrs)
			}
		})
	}
	resp, err := http.Get("http://" + backendAddr + "/_backend/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Warnings    int    `json:"warnings"`
		LastWarning string `json:"last_warning"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if want := warningFor(testGroup, "test-site").Body(); st.Warnings != 1 || st.LastWarning != want {
		t.Fatalf("backend stats = %+v, want 1 warning with body %q", st, want)
	}
}

func startExampleBackend(t *testing.T, bin string, args ...string) string {
	t.Helper()
	_, addr := testproc.StartServer(t, "example backend", testproc.Options{Stop: os.Interrupt}, bin, args...)
	return addr
}

// Regression: a backend warned for two services in one round got only the first group's POST,
// every round, so the second service's warning and its counter never happened.
func TestSenderOnePostPerGroup(t *testing.T) {
	srv, ch := recordingServer(t, http.StatusNoContent)
	s, reg := newTestSender(t, SenderOptions{})
	api := Group{Pool: "pool-a", Service: "api", Version: "v1", Threshold: 1, Serving: []string{"b1"}, Warned: []string{"b1"}}
	web := Group{Pool: "pool-a", Service: "web", Version: "v1", Threshold: 1, Serving: []string{"b1"}, Warned: []string{"b1"}}
	s.Send([]Target{{Backend: "b1", Address: addr(srv), Group: api}, {Backend: "b1", Address: addr(srv), Group: web}})
	s.wait()
	bodies := map[string]bool{}
	for len(ch) > 0 {
		r := <-ch
		bodies[strings.Fields(r.body)[0]] = true
	}
	if !bodies["api"] || !bodies["web"] {
		t.Fatalf("bodies for services %v, want one POST for api and one for web", bodies)
	}
	for _, svc := range []string{"api", "web"} {
		if got, _ := metrictest.Value(t, reg, `pollbal_warnings_sent_total{pool="pool-a",service="`+svc+`",version="v1"}`); got != 1 {
			t.Fatalf("warnings_sent_total{service=%s} = %v, want 1", svc, got)
		}
	}
}
