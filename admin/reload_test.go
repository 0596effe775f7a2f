package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"pollbal/configs"
)

// reloadWith is a Reload that answers err.
func reloadWith(err error) func(context.Context, bool) error {
	return func(context.Context, bool) error { return err }
}

// TestReloadForceAndReasons: POST /admin/reload parses ?force strictly, passes it on, and a
// rejected reload answers (and audits) its reason.
func TestReloadForceAndReasons(t *testing.T) {
	guard := configs.Reject(configs.ReasonGuard, errors.New("the new configuration keeps 1 of the 6 running backends (fewer than half)"))
	changing := configs.Reject(configs.ReasonChanging, errors.New("the file was still changing after 2s"))
	_, invalid := configs.Parse([]byte("site: x\nbogus: 1\n"))
	tests := []struct {
		name       string
		query      string
		answer     error // what Reload returns
		wantCode   int
		wantCalled bool
		wantForce  bool
		wantReason string // in the JSON answer and the audit line
		wantInErr  string
	}{
		{name: "no query", wantCode: 200, wantCalled: true},
		{name: "force=true", query: "?force=true", wantCode: 200, wantCalled: true, wantForce: true},
		{name: "force=false", query: "?force=false", wantCode: 200, wantCalled: true},
		{name: "empty query", query: "?", wantCode: 200, wantCalled: true},
		{name: "force=1 is not strict", query: "?force=1", wantCode: 400, wantInErr: "want true or false"},
		{name: "force=TRUE is not strict", query: "?force=TRUE", wantCode: 400, wantInErr: "want true or false"},
		{name: "force without a value", query: "?force", wantCode: 400, wantInErr: "want true or false"},
		{name: "force twice", query: "?force=true&force=true", wantCode: 400, wantInErr: "more than once"},
		{name: "unknown parameter", query: "?forse=true", wantCode: 400, wantInErr: "unknown query parameter"},
		{name: "bad escaping", query: "?force=%zz", wantCode: 400, wantInErr: "bad query"},
		{name: "guard rejects", answer: guard, wantCode: 409, wantCalled: true, wantReason: "reload_guard", wantInErr: "fewer than half"},
		{name: "file changing", answer: changing, wantCode: 409, wantCalled: true, wantReason: "config_changing", wantInErr: "still changing"},
		{name: "invalid config", answer: invalid, wantCode: 500, wantCalled: true, wantReason: "config_invalid", wantInErr: "bogus"},
		{name: "forced and still invalid", query: "?force=true", answer: invalid, wantCode: 500, wantCalled: true, wantForce: true, wantReason: "config_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called, forced := false, false
			f := newFixture(t, fixtureOptions{reload: func(_ context.Context, force bool) error {
				called, forced = true, force
				return tt.answer
			}})
			resp := f.do(t, "POST", "/admin/reload"+tt.query, bearer(testToken), "")
			if resp.code != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", resp.code, tt.wantCode, resp.body)
			}
			if called != tt.wantCalled || forced != tt.wantForce {
				t.Fatalf("reload called %v with force %v, want %v and %v", called, forced, tt.wantCalled, tt.wantForce)
			}
			var body struct {
				Error    string   `json:"error"`
				Reason   string   `json:"reason"`
				Problems []string `json:"problems"`
			}
			if err := json.Unmarshal([]byte(resp.body), &body); err != nil {
				t.Fatalf("answer %q: %v", resp.body, err)
			}
			if body.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q (%s)", body.Reason, tt.wantReason, resp.body)
			}
			if tt.wantInErr != "" && !strings.Contains(body.Error, tt.wantInErr) {
				t.Errorf("error %q does not contain %q", body.Error, tt.wantInErr)
			}
			if tt.wantReason != "" && len(body.Problems) == 0 {
				t.Errorf("a rejected reload lists no problem: %s", resp.body)
			}
			recs := f.logs.Records(t, "admin call")
			if len(recs) != 1 {
				t.Fatalf("%d audit lines, want 1", len(recs))
			}
			if got, _ := recs[0]["reason"].(string); got != tt.wantReason {
				t.Errorf("audit reason %q, want %q (%v)", got, tt.wantReason, recs[0])
			}
			if got, _ := recs[0]["force"].(bool); got != tt.wantForce {
				t.Errorf("audit force %v, want %v (%v)", got, tt.wantForce, recs[0])
			}
		})
	}
}
