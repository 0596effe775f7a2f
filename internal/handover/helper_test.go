package handover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the program the tests hand sockets to: with helperEnv set, TestMain
// runs helperMain instead of the tests. Children inherit the environment, so a test picks
// what the process an upgrade starts does with t.Setenv.
const (
	helperEnv = "HANDOVER_TEST_HELPER" // serve, hang or exit (see helperMain)
	listenEnv = "HANDOVER_TEST_LISTEN" // the helper's "configuration": "proxy=ADDR admin=ADDR"
)

// helperLifetime ends a helper that its test forgot (the test binary died): no test waits
// this long.
const helperLifetime = 3 * time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

// helperMain is a small pollbal: modes
//   - serve: New, Listen on listenEnv's listeners, answer every HTTP request with
//     "pid=<pid> exe=<inode of its binary>", Ready; on SIGUSR2 Upgrade, and after a successful
//     one shut its servers down (closing its listeners) and exit 0; on SIGTERM shut down too.
//   - hang: New and Listen, and never signal ready.
//   - exit: exit 3 at once, as a new binary that rejects its configuration does.
//
// It prints "listening NAME ADDR", "ready pid=PID from=FROM", "upgraded to PID", "upgrade
// failed: ERR" and "drained" on standard output, and exits 1 when New or Listen fail.
func helperMain(mode string) int {
	if mode == "exit" {
		return 3
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var names, addrs []string
	for _, kv := range strings.Fields(os.Getenv(listenEnv)) {
		name, addr, _ := strings.Cut(kv, "=")
		names, addrs = append(names, name), append(addrs, addr)
	}
	h, err := New(Options{Names: names, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "new:", err)
		return 1
	}
	var servers []*server
	for i, name := range names {
		ln, err := h.Listen(name, addrs[i])
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			return 1
		}
		fmt.Printf("listening %s %s\n", name, ln.Addr())
		servers = append(servers, serve(ln))
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR2, syscall.SIGTERM)
	lifetime := time.NewTimer(helperLifetime)
	if mode == "hang" {
		select {
		case <-signals:
		case <-lifetime.C:
		}
		return 2
	}
	if err := h.Ready(); err != nil {
		fmt.Fprintln(os.Stderr, "ready:", err)
	}
	fmt.Printf("ready pid=%d from=%s\n", os.Getpid(), h.Inherited())
	for {
		select {
		case sig := <-signals:
			if sig == syscall.SIGUSR2 {
				pid, err := h.Upgrade(context.Background())
				if err != nil {
					fmt.Printf("upgrade failed: %v\n", err)
					continue
				}
				fmt.Printf("upgraded to %d\n", pid)
			} else if err := h.Stopping(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping:", err)
			}
			for _, srv := range servers {
				if err := srv.drain(30 * time.Second); err != nil {
					fmt.Fprintln(os.Stderr, "drain:", err)
				}
			}
			fmt.Println("drained")
			return 0
		case <-lifetime.C:
			return 2
		}
	}
}

// server serves answerPID on a listener and drains as pollbal does: stop accepting, finish
// every connection accepted, then close. (http.Server.Shutdown is not that: it drops a request
// that it reads after Shutdown began, unanswered.)
type server struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{} // closed when Serve returned: every accepted connection is counted
	open   atomic.Int64  // connections accepted and not closed
}

func serve(ln net.Listener) *server {
	s := &server{ln: ln, served: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(answerPID),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.open.Add(-1)
			}
		},
	}
	go func() {
		_ = s.srv.Serve(ln)
		close(s.served)
	}()
	return s
}

// drain stops accepting and waits up to timeout for the connections in flight to finish.
func (s *server) drain(timeout time.Duration) error {
	defer s.srv.Close()
	_ = s.ln.Close()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case <-s.served:
	case <-deadline.C:
		return errors.New("serve did not return")
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.open.Load() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%d connections still open", s.open.Load())
		}
	}
	return nil
}

// answerPID answers with this process's pid and the inode of the binary it runs.
func answerPID(w http.ResponseWriter, _ *http.Request) {
	_, _ = fmt.Fprintf(w, "pid=%d exe=%d", os.Getpid(), exeInode())
}

func exeInode() uint64 {
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// answer is what a helper (or a test's own server) said: its pid and its binary's inode.
type answer struct {
	pid int
	exe uint64
}

// ask sends GET / to addr on a new connection and reads the answer.
func ask(client *http.Client, addr string) (answer, error) {
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	if _, err := fmt.Fscanf(resp.Body, "pid=%d exe=%d", &a.pid, &a.exe); err != nil {
		return answer{}, fmt.Errorf("answer from %s: %w", addr, err)
	}
	return a, nil
}

// newClient opens a connection per request, as a loop of new clients does.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
}

// gone says whether no process pid exists (a zombie still does).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
