package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pollbal/internal/metrictest"
)

// TestEndToEndReloadForgetsRemovedBackendsWarnings runs the real binary with three backends
// that are warned every round. One of them rejects the unsigned warnings (it wants a secret), so
// pollbal_warning_errors_total{backend="strict"} grows; a reload that removes it must drop that
// series at once and for good, with the removed backend gone from the state and the others
// still warned.
func TestEndToEndReloadForgetsRemovedBackendsWarnings(t *testing.T) {
	token := writeToken(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("only-the-backend-knows\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body := "web serving v1\n"
	ok1 := startBackend(t, "ok-1", "127.0.0.1:0", body)
	ok2 := startBackend(t, "ok-2", "127.0.0.1:0", body)
	strict := startBackend(t, "strict", "127.0.0.1:0", body, "-secret-file", secret)
	config := func(backends ...*backend) string {
		cfg := fmt.Sprintf(`site: e2e
listen: LISTEN
admin: {listen: ADMIN, token_file: %s}
poll: {interval: 500ms, timeout: 450ms}
services: {web: {warning_threshold: 3}}
apps: [{name: www, hosts: ["*"]}]
backends:
`, token)
		for _, b := range backends {
			cfg += fmt.Sprintf("  - {id: %s, address: %s, capacity: 4}\n", b.id, b.addr)
		}
		return cfg
	}
	pb := startPollbal(t, config(ok1, ok2, strict))
	const strictErrors = `pollbal_warning_errors_total{backend="strict"}`
	pb.WaitFor(t, 10*time.Second, "a rejected warning to strict counted", func() bool {
		n, _ := metrictest.TextValue(t, pb.metrics(t), strictErrors)
		return n >= 1
	})

	if err := os.WriteFile(pb.cfgPath, []byte(fillAddrs(config(ok1, ok2), pb.listen, pb.admin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if a := postReload(t, pb, ""); a.code != http.StatusOK {
		t.Fatalf("reload answered %d %+v", a.code, a)
	}
	if v, ok := metrictest.TextValue(t, pb.metrics(t), strictErrors); ok {
		t.Fatalf("right after the reload %s = %v, want the series gone", strictErrors, v)
	}
	// Several more warning rounds: ok-1 receives a warning in each.
	before := ok1.stats(t).Warnings
	pb.WaitFor(t, 10*time.Second, "three more warnings to ok-1", func() bool { return ok1.stats(t).Warnings >= before+3 })
	if v, ok := metrictest.TextValue(t, pb.metrics(t), strictErrors); ok {
		t.Errorf("after more warning rounds %s = %v: the removed backend's series came back", strictErrors, v)
	}
	st := pb.state(t)
	if _, _, _, found := st.backend("strict"); found {
		t.Error("the removed backend is still in /api/state")
	}
	if len(st.Groups) != 1 || st.Groups[0].Serving != 2 || len(st.Groups[0].Warned) != 2 {
		t.Errorf("groups after the reload = %+v, want one group with ok-1 and ok-2 serving and warned", st.Groups)
	}
}
