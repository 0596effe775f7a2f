package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"pollbal/internal/testetcd"
	"pollbal/internal/testproc"
)

// etcdFleet is three pollbal instances that share one etcd, each with its own state file.
type etcdFleet struct {
	etcd      *testetcd.Server
	cli       *clientv3.Client
	instances []*instance
	web1      *backend
	web2      *backend
}

const etcdPrefix = "/e2e/"

// etcdFleetConfig is one instance's config; dial bounds each etcd call (admin.store.etcd.dial_timeout).
func etcdFleetConfig(t *testing.T, dial time.Duration, endpoint, web1, web2 string) string {
	store := fmt.Sprintf("  store:\n    etcd:\n      endpoints: [%q]\n      prefix: %s\n      dial_timeout: %s\n", endpoint, etcdPrefix, dial)
	return movesConfig(writeToken(t), filepath.Join(t.TempDir(), "moves.json"), store, web1, web2)
}

func startEtcdFleet(t *testing.T, dial time.Duration) *etcdFleet {
	t.Helper()
	f := &etcdFleet{etcd: testetcd.Start(t)}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcd.Client}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f.cli = cli
	f.web1 = startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	f.web2 = startBackend(t, "web-2", "127.0.0.1:0", "web serving v1\n")
	for range 3 {
		f.instances = append(f.instances, startPollbal(t, etcdFleetConfig(t, dial, f.etcd.Client, f.web1.addr, f.web2.addr)))
	}
	for i, in := range f.instances {
		testproc.WaitFor(t, 10*time.Second, fmt.Sprintf("instance %d: store up", i), func() bool { return storeOf(t, in).Up })
	}
	return f
}

type storeState struct {
	Kind     string `json:"kind"`
	Up       bool   `json:"up"`
	Revision int64  `json:"revision"`
}

func storeOf(t *testing.T, in *instance) storeState {
	t.Helper()
	var s struct {
		Store storeState `json:"store"`
	}
	getJSON(t, "http://"+in.admin+"/api/state", &s)
	return s.Store
}

func pool(t *testing.T, in *instance, id string) string {
	p, _ := poolOf(t, in, id)
	return p
}

// etcdRevision is etcd's current revision.
func (f *etcdFleet) revision(t *testing.T) int64 {
	t.Helper()
	resp, err := f.cli.Get(context.Background(), etcdPrefix+"moves/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestEndToEndEtcdFleet: three real pollbal processes share one etcd. A move on one reaches
// the others within 1 s; with etcd stopped scheduling goes on, moves are refused with 503 and
// nothing changes, pollbal_store_up is 0 and the alarm is raised; an instance restarted during
// the outage keeps the fleet's moves from its cache; once etcd is back every instance converges,
// including on a move written to etcd directly while none of them could reach it.
func TestEndToEndEtcdFleet(t *testing.T) {
	f := startEtcdFleet(t, time.Second)
	a, b, c := f.instances[0], f.instances[1], f.instances[2]
	for _, in := range f.instances {
		testproc.WaitFor(t, 5*time.Second, "both backends ready", func() bool {
			s := in.state(t)
			r1, _, _, _ := s.backend("web-1")
			r2, _, _, _ := s.backend("web-2")
			return r1 && r2
		})
	}

	// A move on a reaches b and c within 1 s.
	start := time.Now()
	if code, body := adminCall(t, a, http.MethodPut, "/admin/backends/web-1/pool", `{"pool":"unassigned"}`); code != 200 {
		t.Fatalf("move on a: %d %s", code, body)
	}
	answered := time.Since(start)
	if p := pool(t, a, "web-1"); p != "unassigned" {
		t.Fatalf("a answered before applying its own move: web-1 in %s", p)
	}
	for _, in := range []*instance{b, c} {
		took := testproc.WaitFor(t, time.Second, "the move on the other instances", func() bool { return pool(t, in, "web-1") == "unassigned" })
		t.Logf("move on %s (answered in %s) seen by %s %s after the answer", a.admin, answered, in.admin, took)
	}
	got, err := f.cli.Get(context.Background(), etcdPrefix+"moves/web-1")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "unassigned" {
		t.Fatalf("etcd: %v %v, want %smoves/web-1 = unassigned", got, err, etcdPrefix)
	}
	for _, in := range f.instances {
		audit := regexp.MustCompile(`msg="admin move applied".*target=web-1 pool=unassigned revision=` + strconv.FormatInt(got.Kvs[0].ModRevision, 10))
		in.WaitFor(t, 5*time.Second, fmt.Sprintf("%s: an audit line naming revision %d", in.admin, got.Kvs[0].ModRevision),
			func() bool { return audit.MatchString(in.Output()) })
	}

	// etcd stops: scheduling goes on, moves are refused, the gauge and the alarm say so.
	f.etcd.Stop()
	client := loadClient(1)
	for _, in := range f.instances {
		testproc.WaitFor(t, 5*time.Second, "store down", func() bool { return !storeOf(t, in).Up })
		testproc.WaitFor(t, time.Second, "pollbal_store_up 0", func() bool { return strings.Contains(in.metrics(t), "\npollbal_store_up 0\n") })
		in.WaitOutput(t, 5*time.Second, in.admin+": the store_unavailable alarm in the log", "msg=store_unavailable")
		code, body, reason := adminCallReason(t, in, http.MethodPut, "/admin/backends/web-2/pool", `{"pool":"unassigned"}`)
		if code != http.StatusServiceUnavailable || reason != "store_unavailable" || !strings.Contains(body, `"reason":"store_unavailable"`) {
			t.Fatalf("PUT during the outage: %d %q %s, want 503 store_unavailable", code, reason, body)
		}
		if p := pool(t, in, "web-2"); p != "default" {
			t.Fatalf("a refused move changed web-2's pool to %s", p)
		}
		for i := range 5 {
			if ans, err := do(t, client, "http://"+in.listen+"/", "www.test"); err != nil || ans.code != 200 || ans.backend != "web-2" {
				t.Fatalf("request %d during the outage: %+v %v, want 200 from web-2 (web-1 stays moved)", i, ans, err)
			}
		}
	}
	if n := strings.Count(a.Output(), "msg=store_unavailable"); n != 1 {
		t.Errorf("a logged the store_unavailable alarm %d times, want 1 (deduplicated)", n)
	}

	// c restarts while etcd is down: it keeps the fleet's moves from its cache.
	c.Kill()
	c = startPollbalAt(t, c)
	f.instances[2] = c
	if p, src := poolOf(t, c, "web-1"); p != "unassigned" || src != "admin" {
		t.Fatalf("c restarted during the outage: web-1 in %s (%s), want unassigned (admin) from its cache", p, src)
	}
	if st := storeOf(t, c); st.Up || st.Kind != "etcd" {
		t.Fatalf("c's store during the outage: %+v", st)
	}

	// A move written to etcd directly while no instance can reach it (etcd serves on another
	// port), then etcd comes back where the fleet looks for it.
	f.etcd.Serve(testproc.FreeAddr(t))
	direct, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcd.Serving()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	put, err := direct.Put(context.Background(), etcdPrefix+"moves/web-2", "pool-direct")
	direct.Close()
	if err != nil {
		t.Fatal(err)
	}
	f.etcd.Stop()
	f.etcd.Serve(f.etcd.Client)
	for _, in := range f.instances {
		took := testproc.WaitFor(t, 10*time.Second, "converged after etcd came back", func() bool {
			st := storeOf(t, in)
			return st.Up && st.Revision >= put.Header.Revision && pool(t, in, "web-2") == "pool-direct" && pool(t, in, "web-1") == "unassigned"
		})
		t.Logf("%s converged %s after etcd came back", in.admin, took)
		testproc.WaitFor(t, time.Second, "pollbal_store_up 1", func() bool { return strings.Contains(in.metrics(t), "\npollbal_store_up 1\n") })
	}
	// Moves work again.
	if code, body := adminCall(t, b, http.MethodDelete, "/admin/backends/web-1/pool", ""); code != 200 {
		t.Fatalf("DELETE after reconnect: %d %s", code, body)
	}
	for _, in := range f.instances {
		testproc.WaitFor(t, time.Second, "the DELETE everywhere", func() bool { return pool(t, in, "web-1") == "default" })
	}
}

var auditRe = regexp.MustCompile(`msg="admin (?:move applied|call)".* action=(move|clear_override) target=(\S+)(?: status=\d+)? pool=(\S*) (?:.*)?revision=(\d+)`)

// TestEndToEndEtcdConcurrentWriters: 3 instances × 50 moves of the same backends at once;
// afterwards every instance agrees with etcd, and every audit line's revision is in etcd's
// history with the pool the line names.
func TestEndToEndEtcdConcurrentWriters(t *testing.T) {
	// Each etcd call may take 5 s, not 1 s: 150 transactions at once on a loaded 2-core machine,
	// etcd under -race in the test process, can take longer than a second, and the answer then
	// is a (correct) 503 "nothing changed" instead of the move this test is about.
	f := startEtcdFleet(t, 5*time.Second)
	const perInstance = 50
	pools := []string{"pool-a", "pool-b", "pool-c", "unassigned"}
	var wg sync.WaitGroup
	errs := make(chan string, 3*perInstance)
	start := time.Now()
	for i, in := range f.instances {
		for j := range perInstance {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := []string{"web-1", "web-2"}[j%2]
				body := fmt.Sprintf(`{"pool":%q}`, pools[(i+j)%len(pools)])
				req, err := http.NewRequest(http.MethodPut, "http://"+in.admin+"/admin/backends/"+id+"/pool", strings.NewReader(body))
				if err != nil {
					errs <- err.Error()
					return
				}
				req.Header.Set("Authorization", "Bearer "+adminToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("PUT %s on %s: %s", id, in.admin, resp.Status)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	t.Logf("%d concurrent moves answered in %s", 3*perInstance, time.Since(start))

	ctx := context.Background()
	rev := f.revision(t)
	want := map[string]string{}
	for _, id := range []string{"web-1", "web-2"} {
		resp, err := f.cli.Get(ctx, etcdPrefix+"moves/"+id)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd %s: %v %v", id, resp, err)
		}
		want[id] = string(resp.Kvs[0].Value)
	}
	for _, in := range f.instances {
		testproc.WaitFor(t, 10*time.Second, "instance agrees with etcd", func() bool {
			return storeOf(t, in).Revision == rev && pool(t, in, "web-1") == want["web-1"] && pool(t, in, "web-2") == want["web-2"]
		})
	}
	// Each instance logs its 50 calls and applies the 150 moves (or fewer, when one watch
	// response carries several); the lines reach the test through pipes, after the answers.
	testproc.WaitFor(t, 10*time.Second, fmt.Sprintf("at least %d audit lines with a revision", 3*perInstance*2), func() bool {
		n := 0
		for _, in := range f.instances {
			n += len(auditRe.FindAllStringIndex(in.Output(), -1))
		}
		return n >= 3*perInstance*2
	})
	lines := 0
	for _, in := range f.instances {
		for _, line := range strings.Split(in.Output(), "\n") {
			m := auditRe.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			lines++
			r, _ := strconv.ParseInt(m[4], 10, 64)
			resp, err := f.cli.Get(ctx, etcdPrefix+"moves/"+m[2], clientv3.WithRev(r))
			if err != nil {
				t.Fatalf("etcd at revision %d: %v", r, err)
			}
			got := ""
			if len(resp.Kvs) == 1 {
				got = string(resp.Kvs[0].Value)
			}
			if m[1] == "move" && got != m[3] {
				t.Errorf("audit line %q: etcd holds %q for %s at revision %d", line, got, m[2], r)
			}
		}
	}
	t.Logf("%d audit lines checked against etcd's history (last revision %d)", lines, rev)
}

// TestEndToEndEtcdMoveForAnUnknownBackend: an instance keeps a move for a backend id it does not
// have (another site's list may differ) and applies it when a reload adds the backend.
func TestEndToEndEtcdMoveForAnUnknownBackend(t *testing.T) {
	srv := testetcd.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Client}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	web1 := startBackend(t, "web-1", "127.0.0.1:0", "web serving v1\n")
	web2 := startBackend(t, "web-2", "127.0.0.1:0", "web serving v1\n")
	full := etcdFleetConfig(t, time.Second, srv.Client, web1.addr, web2.addr)
	withoutWeb2 := strings.Replace(full, "  - {id: web-2, address: "+web2.addr+"}\n", "", 1)
	if withoutWeb2 == full {
		t.Fatal("etcdFleetConfig changed: cannot drop web-2")
	}
	in := startPollbal(t, withoutWeb2)
	testproc.WaitFor(t, 10*time.Second, "store up", func() bool { return storeOf(t, in).Up })
	put, err := cli.Put(context.Background(), etcdPrefix+"moves/web-2", "unassigned")
	if err != nil {
		t.Fatal(err)
	}
	testproc.WaitFor(t, time.Second, "the move read", func() bool { return storeOf(t, in).Revision >= put.Header.Revision })
	in.WaitOutput(t, 5*time.Second, "an audit line for the move of a backend this instance lacks",
		"target=web-2 pool=unassigned revision="+strconv.FormatInt(put.Header.Revision, 10))
	if err := os.WriteFile(in.cfgPath, []byte(fillAddrs(full, in.listen, in.admin)), 0o644); err != nil {
		t.Fatal(err)
	}
	in.Signal(t, syscall.SIGHUP)
	testproc.WaitFor(t, 5*time.Second, "web-2 added by the reload, in the pool etcd says", func() bool {
		pool, source, ok := lookupPool(t, in, "web-2")
		return ok && pool == "unassigned" && source == "admin"
	})
}
