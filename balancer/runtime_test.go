package balancer

import (
	"reflect"
	"testing"
	"time"

	"pollbal/configs"
	"pollbal/internal/configtest"
	"pollbal/protocol"
)

func TestRestoredHealth(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	web := protocol.Report{Service: "web", Status: protocol.Serving, Version: "v1"}
	api := protocol.Report{Service: "api", Status: protocol.Leaving}
	declared := map[string]configs.Service{"web": {}}
	tests := []struct {
		name  string
		saved Health
		want  Health
	}{
		{
			name:  "ready: declared reports kept, slow start kept",
			saved: Health{Ready: true, Reports: []protocol.Report{web}, Checked: at, ReadySince: at.Add(-time.Second)},
			want:  Health{Ready: true, Reports: []protocol.Report{web}, Checked: at, ReadySince: at.Add(-time.Second), Restored: true},
		},
		{
			name:  "a service no longer declared moves to ignored",
			saved: Health{Ready: true, Reports: []protocol.Report{web, api}, Ignored: []string{"db"}, Checked: at},
			want:  Health{Ready: true, Reports: []protocol.Report{web}, Ignored: []string{"db", "api"}, Checked: at, Restored: true},
		},
		{
			name:  "ready in no service",
			saved: Health{Ready: true, Checked: at},
			want:  Health{Ready: true, Checked: at, Restored: true},
		},
		{
			name:  "not ready: its reason, no reports",
			saved: Health{Reason: "status 500", Reports: []protocol.Report{web}, Ignored: []string{"db"}, Checked: at},
			want:  Health{Reason: "status 500", Checked: at, Restored: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := restoredHealth(tt.saved, declared); !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("restoredHealth:\n got  %+v\n want %+v", *got, tt.want)
			}
		})
	}
}

// A second balancer restores what Runtime took from the first, by address: it is ready at once
// and schedules on the backends that were ready, marks them restored until their first check,
// and leaves the backends it has no state for as a fresh start does.
func TestRuntimeRestore(t *testing.T) {
	apps := []configs.App{{Name: "shop", Hosts: []string{"*"}}}
	first := newTestBalancer(t, configtest.New(apps, []configs.Backend{
		{ID: "web-1", Address: "127.0.0.1:9001"}, {ID: "web-2", Address: "127.0.0.1:9002"}, {ID: "web-3", Address: "127.0.0.1:9003"},
	}), nil)
	markReady(first, []string{"web-1", "web-2"})
	first.Observe(Observation{ID: "web-3", Ready: false, Reason: "connection refused", Checked: time.Now()})
	first.backends["web-2"].ejected.Store(true)
	first.backends["web-2"].failStreak.Store(3)
	saved := first.Runtime()
	if len(saved) != 3 {
		t.Fatalf("Runtime listed %d backends, want 3", len(saved))
	}

	// The next process's configuration renamed web-1 (same socket, spelt differently),
	// dropped web-3 and added web-4.
	second := newTestBalancer(t, configtest.New(apps, []configs.Backend{
		{ID: "renamed", Address: "localhost:9001"}, {ID: "web-2", Address: "127.0.0.1:9002"}, {ID: "web-4", Address: "127.0.0.1:9004"},
	}), nil)
	if second.Ready() {
		t.Fatal("ready before any check or restore")
	}
	if n := second.Restore(saved); n != 2 {
		t.Fatalf("Restore restored %d backends, want 2 (renamed by address, web-2)", n)
	}
	if !second.Ready() {
		t.Error("not ready after a restore")
	}
	health := func(id string) *Health {
		t.Helper()
		for _, m := range second.Snapshot().Members(time.Now()) {
			if m.Backend.ID == id {
				return m.Backend.Health()
			}
		}
		t.Fatalf("%s is not a member of the snapshot", id)
		return nil
	}
	if h := health("renamed"); !h.Ready || !h.Restored || len(h.Reports) != 1 || h.Reports[0].Version != "v1" {
		t.Errorf("renamed: %+v, want ready, restored, with web-1's reports", h)
	}
	if h := health("web-2"); !h.Ready || !h.Restored || !second.backends["web-2"].Ejected() {
		t.Errorf("web-2: %+v (ejected %v), want ready, restored and still ejected", h, second.backends["web-2"].Ejected())
	}
	if h := health("web-4"); h.Ready || h.Restored || h.Reason != "not checked yet" {
		t.Errorf("web-4: %+v, want not checked yet and not restored", h)
	}
	s := second.Snapshot()
	l, err := second.Acquire(s, s.AppByName("shop"), nil)
	if err != nil {
		t.Fatalf("Acquire after a restore: %v", err)
	}
	if l.Backend.ID != "renamed" {
		t.Errorf("leased %s, want renamed (web-2 is ejected)", l.Backend.ID)
	}
	l.Release()

	second.Observe(Observation{ID: "renamed", Ready: true, Reports: []protocol.Report{{Service: "web", Status: protocol.Serving, Version: "v2"}}, Checked: time.Now()})
	if health("renamed").Restored {
		t.Error("still marked restored after its first check")
	}
}

func TestRestoreOfNoConfiguredBackendIsNotReady(t *testing.T) {
	bal := newTestBalancer(t, configtest.New(nil, []configs.Backend{{ID: "web-1", Address: "127.0.0.1:9001"}}), nil)
	if n := bal.Restore([]Runtime{{ID: "web-1", Address: "127.0.0.1:9999", Health: Health{Ready: true}}}); n != 0 || bal.Ready() {
		t.Errorf("Restore = %d, Ready = %v; want nothing restored and not ready", n, bal.Ready())
	}
}
