package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"pollbal/internal/handover"
)

// POST /admin/upgrade needs the token like every /admin/* call, answers the new pid once the
// new process is ready, 409 for the hand-over's sentinels (another upgrade running, already
// handed over, not ready yet), 500 with the reason when the new process failed, and writes
// one audit line each time.
func TestUpgrade(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		query    string
		auth     string
		pid      int
		answer   error
		wantCode int
		wantCall bool
		wantBody string // in the answer
	}{
		{name: "upgraded", pid: 4321, wantCode: 200, wantCall: true, wantBody: `"pid":4321`},
		{name: "another upgrade runs", answer: handover.ErrUpgradeInProgress, wantCode: 409, wantCall: true, wantBody: "already in progress"},
		{name: "already handed over", answer: fmt.Errorf("%w (pid 9)", handover.ErrHandedOver), wantCode: 409, wantCall: true, wantBody: "already handed over"},
		{name: "not ready itself", answer: handover.ErrNotReady, wantCode: 409, wantCall: true, wantBody: "not ready yet"},
		{name: "new process failed", pid: 77, answer: errors.New("upgrade: new process 77 exited with status 1 before it was ready"), wantCode: 500, wantCall: true, wantBody: "exited with status 1"},
		{name: "no token", auth: "-", wantCode: 401},
		{name: "GET", method: "GET", wantCode: 405},
		{name: "a query", query: "?now=1", wantCode: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			f := newFixture(t, fixtureOptions{upgrade: func(context.Context) (int, error) {
				called = true
				return tt.pid, tt.answer
			}})
			method, auth := "POST", bearer(testToken)
			if tt.method != "" {
				method = tt.method
			}
			if tt.auth == "-" {
				auth = ""
			}
			resp := f.do(t, method, "/admin/upgrade"+tt.query, auth, "")
			if resp.code != tt.wantCode || !strings.Contains(resp.body, tt.wantBody) {
				t.Fatalf("answer %d %s, want %d with %q", resp.code, resp.body, tt.wantCode, tt.wantBody)
			}
			if called != tt.wantCall {
				t.Errorf("upgrade called %v, want %v", called, tt.wantCall)
			}
			recs := f.logs.Records(t, "admin call")
			if len(recs) != 1 || recs[0]["action"] != "upgrade" || recs[0]["status"] != float64(tt.wantCode) {
				t.Fatalf("audit lines %v, want one upgrade line with status %d", recs, tt.wantCode)
			}
			if tt.pid != 0 && recs[0]["pid"] != float64(tt.pid) {
				t.Errorf("audit line %v does not name pid %d", recs[0], tt.pid)
			}
		})
	}
}

func TestUpgradeNotAvailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	if resp := f.do(t, "POST", "/admin/upgrade", bearer(testToken), ""); resp.code != 501 {
		t.Errorf("answer %d %s, want 501 without an upgrade function", resp.code, resp.body)
	}
}

// The state names the serving process and when it started, so that an upgrade can be watched
// from outside.
func TestStateNamesTheProcess(t *testing.T) {
	started := time.Date(2026, 12, 3, 9, 30, 0, 0, time.FixedZone("x", 3600))
	f := newFixture(t, fixtureOptions{started: started})
	var st struct {
		PID     int    `json:"pid"`
		Started string `json:"started"`
	}
	resp := f.do(t, "GET", "/api/state", "", "")
	if err := json.Unmarshal([]byte(resp.body), &st); err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Started != "2026-12-03T08:30:00Z" {
		t.Errorf("pid %d started %q, want %d and 2026-12-03T08:30:00Z", st.PID, st.Started, os.Getpid())
	}
	page := f.do(t, "GET", "/", "", "")
	if !strings.Contains(page.body, fmt.Sprintf(`id="pid">%d<`, os.Getpid())) || !strings.Contains(page.body, "2026-12-03T08:30:00Z") {
		t.Error("the status page does not show the pid and the start time")
	}
}
