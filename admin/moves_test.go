package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"pollbal/internal/store"
	"pollbal/internal/testproc"
)

func storeObject(t *testing.T, f *fixture) store.Status {
	t.Helper()
	r := f.do(t, http.MethodGet, "/api/state", "", "")
	var s struct {
		Store *store.Status `json:"store"`
	}
	if err := json.Unmarshal([]byte(r.body), &s); err != nil || s.Store == nil {
		t.Fatalf("/api/state has no store object: %v %s", err, r.body)
	}
	return *s.Store
}

func TestStateNamesTheLocalStore(t *testing.T) {
	if got := storeObject(t, newFixture(t, fixtureOptions{})); got != (store.Status{Kind: "file", Up: true}) {
		t.Errorf("with a state file: %+v", got)
	}
	if got := storeObject(t, newFixture(t, fixtureOptions{stateFile: "-"})); got != (store.Status{Kind: "memory", Up: true}) {
		t.Errorf("without a state file: %+v", got)
	}
}

// The store here is a real etcd store whose endpoint nothing listens on; it has never read
// etcd, so it is down.
func TestMovesRefusedWhileTheStoreIsUnavailable(t *testing.T) {
	f := newFixture(t, fixtureOptions{etcd: testproc.FreeAddr(t), overrides: map[string]string{"web-3": "unassigned"}})
	before := f.bal.Overrides()
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPut, "/admin/backends/web-1/pool", `{"pool":"unassigned"}`},
		{http.MethodDelete, "/admin/backends/web-3/pool", ""},
	} {
		r := f.do(t, tc.method, tc.path, bearer(testToken), tc.body)
		if r.code != http.StatusServiceUnavailable || r.header.Get("X-Pollbal-Reason") != ReasonStoreUnavailable ||
			!strings.Contains(r.body, `"reason":"store_unavailable"`) {
			t.Fatalf("%s %s: %d %q %s, want 503 store_unavailable", tc.method, tc.path, r.code, r.header.Get("X-Pollbal-Reason"), r.body)
		}
	}
	if got := f.bal.Overrides(); !maps.Equal(got, before) {
		t.Errorf("refused moves changed the overrides: %v, want %v", got, before)
	}
	audits := f.logs.Records(t, "admin call")
	if len(audits) != 2 || audits[0]["status"] != float64(503) || audits[0]["reason"] != ReasonStoreUnavailable {
		t.Errorf("audit lines %v", audits)
	}
	if got := storeObject(t, f); got != (store.Status{Kind: "etcd"}) {
		t.Errorf("store object %+v, want etcd, down", got)
	}
	page := f.do(t, http.MethodGet, "/", "", "")
	if !strings.Contains(page.body, `id="store" data-kind="etcd" data-up="false"`) || !strings.Contains(page.body, "unreachable") {
		t.Errorf("the status page does not show the unreachable store")
	}
}

// answeringStore is a store of moves that answers every call with its fields, changing nothing.
type answeringStore struct {
	rev int64
	err error
}

func (s answeringStore) Set(context.Context, string, string) (int64, error) { return s.rev, s.err }
func (s answeringStore) Clear(context.Context, string) (int64, error)       { return s.rev, s.err }
func (answeringStore) SetStateFile(string) error                            { return nil }
func (answeringStore) Status() store.Status                                 { return store.Status{Kind: store.KindEtcd, Up: true} }
func (answeringStore) Run(context.Context) error                            { return nil }
func (answeringStore) Close() error                                         { return nil }

// Every error of the store maps to one answer, and the audit line names the store's revision
// only when the store wrote something (a DELETE of no move writes nothing and has none).
func TestMoveAnswers(t *testing.T) {
	tests := []struct {
		name       string
		store      answeringStore
		method     string
		wantCode   int
		wantReason string
		wantInErr  string
		wantRev    any // the audit line's revision; nil when absent
	}{
		{name: "move committed", store: answeringStore{rev: 42}, method: http.MethodPut, wantCode: 200, wantRev: float64(42)},
		{name: "clear committed", store: answeringStore{rev: 43}, method: http.MethodDelete, wantCode: 200, wantRev: float64(43)},
		{name: "clear of no move", store: answeringStore{}, method: http.MethodDelete, wantCode: 200},
		{name: "invalid pool", store: answeringStore{err: fmt.Errorf("%w %q", store.ErrInvalidPool, "X")}, method: http.MethodPut,
			wantCode: 400, wantInErr: "invalid pool name"},
		{name: "unknown backend", store: answeringStore{err: fmt.Errorf("%w %q", store.ErrUnknownBackend, "web-1")}, method: http.MethodDelete,
			wantCode: 404, wantInErr: `unknown backend "web-1"`},
		{name: "store unavailable", store: answeringStore{err: fmt.Errorf("%w: connection refused", store.ErrUnavailable)}, method: http.MethodPut,
			wantCode: 503, wantReason: ReasonStoreUnavailable, wantInErr: "cannot be reached; nothing changed: store unavailable: connection refused"},
		{name: "not kept", store: answeringStore{err: errors.New("save state: disk full")}, method: http.MethodPut,
			wantCode: 500, wantInErr: "nothing changed: save state: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{store: tt.store})
			r := f.do(t, tt.method, "/admin/backends/web-1/pool", bearer(testToken), `{"pool":"canary"}`)
			if r.code != tt.wantCode || r.header.Get("X-Pollbal-Reason") != tt.wantReason {
				t.Fatalf("%d %q %s, want %d %q", r.code, r.header.Get("X-Pollbal-Reason"), r.body, tt.wantCode, tt.wantReason)
			}
			if tt.wantInErr != "" {
				if msg := errorOf(t, r.body); !strings.Contains(msg, tt.wantInErr) {
					t.Errorf("error %q does not contain %q", msg, tt.wantInErr)
				}
			} else if !strings.Contains(r.body, `"id":"web-1"`) {
				t.Errorf("answer %s does not name the backend", r.body)
			}
			audits := f.logs.Records(t, "admin call")
			if len(audits) != 1 || audits[0]["status"] != float64(tt.wantCode) || audits[0]["revision"] != tt.wantRev {
				t.Errorf("audit line %v, want status %d and revision %v", audits, tt.wantCode, tt.wantRev)
			}
		})
	}
}
