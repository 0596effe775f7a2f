// Command scale measures pollbal with many backends on one machine: how long after the process
// starts every backend shows ready in GET /api/state, the CPU pollbal uses once they are all
// ready, its memory, its descriptors and what one GET /api/state costs. Everything listens on
// 127.0.0.1.
//
// The backends are helper processes (this program, run as `scale serve`), each answering
// GET /pool with "web serving v1" on many listeners; a helper holds a listener and an accepted
// connection per backend, so each serves at most -per-helper backends to stay under the
// descriptor limit. Builds named on -pollbal are measured in turn, interleaved, -runs times per
// size: `scale -pollbal before=/tmp/old,after=bin/pollbal -sizes 1000,10000 -runs 3`.
// `make bench-scale` runs it; bench/README.md explains the output.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scale serve:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// options are the measurement's knobs.
type options struct {
	builds    []build
	sizes     []int
	runs      int
	pools     int
	interval  time.Duration
	maxWait   time.Duration
	settle    time.Duration
	steady    time.Duration
	perHelper int
	basePort  int
	keep      bool
	profile   bool
	capSizes  bool
}

// build is one pollbal binary under a label.
type build struct{ label, path string }

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var o options
	bins := fs.String("pollbal", "bin/pollbal", "label=path,... of the pollbal binaries to measure (a bare path is labelled by its file name)")
	sizes := fs.String("sizes", "1000,5000,10000,20000", "backend counts to measure")
	fs.IntVar(&o.runs, "runs", 3, "runs of each size and build (interleaved)")
	fs.IntVar(&o.pools, "pools", 1, "node pools the backends are spread over (1: all in default; n: pool-t0..t<n-1>, one app each)")
	fs.DurationVar(&o.interval, "interval", time.Second, "poll.interval")
	fs.DurationVar(&o.maxWait, "max-wait", 90*time.Second, "give up waiting for every backend to be ready after this")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "pause between all ready and the CPU window")
	fs.DurationVar(&o.steady, "steady", 10*time.Second, "length of the CPU window")
	fs.IntVar(&o.perHelper, "per-helper", 5000, "backends per helper process (each holds 2 descriptors per backend)")
	fs.IntVar(&o.basePort, "base-port", 10000, "first backend port; backends take free ports upwards, below the ephemeral range")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configs and pollbal logs)")
	fs.BoolVar(&o.capSizes, "cap", true, "measure no more backends than pollbal can hold connections to under the descriptor hard limit")
	fs.BoolVar(&o.profile, "profile", false, "have pollbal write a CPU profile of each run (cpu.prof beside its log; implies -keep)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.keep = o.keep || o.profile
	for _, b := range strings.Split(*bins, ",") {
		label, path, ok := strings.Cut(b, "=")
		if !ok {
			label, path = filepath.Base(b), b
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return o, err
		}
		if _, err := os.Stat(abs); err != nil {
			return o, fmt.Errorf("pollbal binary %s: %w (make build)", label, err)
		}
		o.builds = append(o.builds, build{label: label, path: abs})
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("bad size %q", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.runs < 1 || o.pools < 1 || o.perHelper < 1 {
		return o, errors.New("-runs, -pools and -per-helper must be >= 1")
	}
	return o, nil
}

// result is one measurement of one build at one size.
type result struct {
	build    string
	size     int
	run      int
	ready    time.Duration // process start until every backend shows ready; 0 when it did not happen
	readyCPU float64       // pollbal's CPU seconds until then
	readyN   int           // backends ready when the wait ended
	stateMs  float64       // one GET /api/state once all were ready (or at the end of the wait)
	stateMB  float64
	cores    float64 // pollbal's CPU over the steady window
	busy     float64 // the whole machine's busy cores over the same window
	helpers  float64 // the helper processes' CPU over the same window
	rssMiB   float64
	hwmMiB   float64
	fds      int
	load     string // /proc/loadavg before the run
}

func run(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	hard := raiseFileLimit()
	var notes []string
	for i, n := range o.sizes {
		if fit := fitting(hard); o.capSizes && n > fit {
			notes = append(notes, fmt.Sprintf("%d backends need about %d descriptors in pollbal (a connection to each, and its own); "+
				"the hard limit here is %d, so %d are measured instead (raise the hard limit to measure more)", n, n+fdMargin, hard, fit))
			o.sizes[i] = fit
		}
	}
	dir, err := os.MkdirTemp("", "pollbal-scale-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	printHeader(o, args)
	for _, n := range notes {
		fmt.Printf("- note: %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Println()
	}
	var all []result
	fmt.Println("| build | backends | run | all ready (s) | CPU until then (s) | GET /api/state (ms, MB) | pollbal cores | helpers cores | machine busy cores | VmRSS / VmHWM (MiB) | fds | load before |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for r := 1; r <= o.runs; r++ {
		for _, n := range o.sizes {
			for _, b := range o.builds {
				res, err := measure(o, b, n, r, filepath.Join(dir, fmt.Sprintf("%s-%d-%d", b.label, n, r)))
				if err != nil {
					return fmt.Errorf("%s at %d backends, run %d: %w", b.label, n, r, err)
				}
				all = append(all, res)
				fmt.Println(res.row())
			}
		}
	}
	printSummary(o, all)
	if o.keep {
		fmt.Println("\nkept:", dir)
	}
	return nil
}

func (r result) row() string {
	ready := fmt.Sprintf("%.2f", r.ready.Seconds())
	if r.ready == 0 {
		ready = fmt.Sprintf("not within the wait (%d ready)", r.readyN)
	}
	return fmt.Sprintf("| %s | %d | %d | %s | %.2f | %.0f, %.1f | %.3f | %.2f | %.2f | %.0f / %.0f | %d | %s |",
		r.build, r.size, r.run, ready, r.readyCPU, r.stateMs, r.stateMB, r.cores, r.helpers, r.busy, r.rssMiB, r.hwmMiB, r.fds, r.load)
}

func printHeader(o options, args []string) {
	fmt.Printf("# pollbal at scale, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("- command: `scale %s`\n", strings.Join(args, " "))
	for _, b := range o.builds {
		fmt.Printf("- build %s: %s (%s)\n", b.label, b.path, versionOf(b.path))
	}
	fmt.Printf("- machine: %d CPUs, %s, %s\n", runtime.NumCPU(), cpuModel(), kernel())
	fmt.Printf("- poll.interval %v, %d pool(s), %d backends per helper process, CPU window %v after %v settling\n\n",
		o.interval, o.pools, o.perHelper, o.steady, o.settle)
}

func printSummary(o options, all []result) {
	fmt.Println("\n| build | backends | all ready (s) | pollbal cores | VmRSS (MiB) | VmHWM (MiB) | GET /api/state (ms) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, n := range o.sizes {
		for _, b := range o.builds {
			var rs []result
			for _, r := range all {
				if r.build == b.label && r.size == n {
					rs = append(rs, r)
				}
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s |\n", b.label, n,
				spanReady(rs, o.maxWait),
				span(rs, "%.3f", func(r result) float64 { return r.cores }),
				span(rs, "%.0f", func(r result) float64 { return r.rssMiB }),
				span(rs, "%.0f", func(r result) float64 { return r.hwmMiB }),
				span(rs, "%.0f", func(r result) float64 { return r.stateMs }))
		}
	}
}

// span formats the range of f over rs: "a" or "a–b".
func span(rs []result, format string, f func(result) float64) string {
	vals := make([]float64, 0, len(rs))
	for _, r := range rs {
		vals = append(vals, f(r))
	}
	if len(vals) == 0 {
		return "-"
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

func spanReady(rs []result, maxWait time.Duration) string {
	for _, r := range rs {
		if r.ready == 0 {
			return fmt.Sprintf("> %.0f in %d of %d runs", maxWait.Seconds(), countNotReady(rs), len(rs))
		}
	}
	return span(rs, "%.2f", func(r result) float64 { return r.ready.Seconds() })
}

func countNotReady(rs []result) int {
	n := 0
	for _, r := range rs {
		if r.ready == 0 {
			n++
		}
	}
	return n
}

// measure runs one build with n backends once.
func measure(o options, b build, n, runNo int, dir string) (res result, err error) {
	res = result{build: b.label, size: n, run: runNo, load: loadAvg()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	hs, ports, err := startHelpers(o, n)
	defer stopAll(hs)
	if err != nil {
		return res, err
	}
	listen, admin, err := freePort(), freePort(), error(nil)
	cfgPath := filepath.Join(dir, "pollbal.yaml")
	if err = os.WriteFile(cfgPath, config(o, listen, admin, ports), 0o644); err != nil {
		return res, err
	}
	logf, err := os.Create(filepath.Join(dir, "pollbal.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	cmd := exec.Command(b.path, "run", "-config", cfgPath)
	if o.profile {
		cmd.Args = append(cmd.Args, "-cpuprofile", filepath.Join(dir, "cpu.prof"))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	pb, err := startProc(cmd)
	if err != nil {
		return res, err
	}
	defer pb.stop()
	pid := cmd.Process.Pid
	client := &http.Client{Timeout: 30 * time.Second}
	url := "http://" + admin + "/api/state"
	deadline := start.Add(o.maxWait)
	for time.Now().Before(deadline) {
		ready, err := countReady(client, url, n)
		if err == nil {
			res.readyN = ready
			if ready == n {
				res.ready = time.Since(start)
				res.readyCPU = float64(procTicks(pid)) / clkTck
				break
			}
		}
		if pb.exited() {
			return res, fmt.Errorf("pollbal exited early; see %s", logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.stateMs, res.stateMB = timeState(client, url)
	time.Sleep(o.settle)
	p0, m0, h0 := procTicks(pid), machineTicks(), helperTicks(hs)
	time.Sleep(o.steady)
	p1, m1, h1 := procTicks(pid), machineTicks(), helperTicks(hs)
	secs := o.steady.Seconds()
	res.cores = float64(p1-p0) / clkTck / secs
	res.helpers = float64(h1-h0) / clkTck / secs
	res.busy = float64(m1.busy-m0.busy) / float64(m1.total-m0.total) * float64(runtime.NumCPU())
	res.rssMiB, res.hwmMiB = memory(pid)
	res.fds = countFDs(pid)
	return res, nil
}

// config writes pollbal's configuration: one service, one app per pool, n backends over the
// pools (all in default for one pool). No warnings are due: every group is far above threshold.
func config(o options, listen, admin string, ports []int) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "site: scale\nlisten: %s\nadmin:\n  listen: %s\n", listen, admin)
	timeout := o.interval * 8 / 10
	fmt.Fprintf(&sb, "poll:\n  interval: %v\n  timeout: %v\n  max_backoff: %v\n", o.interval, timeout, 5*o.interval)
	sb.WriteString("services:\n  web:\n    warning_threshold: 2\napps:\n")
	if o.pools == 1 {
		sb.WriteString("  - name: app\n    hosts: [\"*\"]\n    service: web\n")
	} else {
		for p := 0; p < o.pools; p++ {
			fmt.Fprintf(&sb, "  - name: app%d\n    hosts: [\"a%d.test\"]\n    service: web\n    owner: t%d\n", p, p, p)
		}
	}
	sb.WriteString("backends:\n")
	for i, port := range ports {
		fmt.Fprintf(&sb, "  - id: b%05d\n    address: 127.0.0.1:%d\n", i, port)
		if o.pools > 1 {
			fmt.Fprintf(&sb, "    owner: t%d\n", i%o.pools)
		}
	}
	return []byte(sb.String())
}

// countReady reads GET /api/state and counts the backends it shows ready. To keep its own CPU
// small beside pollbal's, it counts `"ready":true` after the "backends" key (no other object
// of the document has a ready field), and decodes the whole document only when that count
// says every backend is ready, to confirm it.
func countReady(c *http.Client, url string, n int) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	i := bytes.Index(body, []byte(`"backends":`))
	if i < 0 {
		return 0, errors.New("no backends in the state")
	}
	if quick := bytes.Count(body[i:], []byte(`"ready":true`)); quick < n {
		return quick, nil
	}
	var st struct {
		Backends []struct {
			Ready bool `json:"ready"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return 0, err
	}
	ready := 0
	for _, b := range st.Backends {
		if b.Ready {
			ready++
		}
	}
	return ready, nil
}

// timeState times one GET /api/state to its last byte.
func timeState(c *http.Client, url string) (ms, mb float64) {
	t := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return -1, 0
	}
	defer resp.Body.Close()
	size, _ := io.Copy(io.Discard, resp.Body)
	return float64(time.Since(t).Microseconds()) / 1000, float64(size) / (1 << 20)
}

// proc is a process this program started, waited for in the background.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process: TERM, then KILL after 30 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// helper is one running `scale serve`.
type helper struct {
	*proc
	ports []int
}

// startHelpers starts helper processes until n backends listen, and returns their ports.
func startHelpers(o options, n int) ([]*helper, []int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var hs []*helper
	var ports []int
	next := o.basePort
	for len(ports) < n {
		k := min(o.perHelper, n-len(ports))
		cmd := exec.Command(self, "serve", "-from", strconv.Itoa(next), "-n", strconv.Itoa(k))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return hs, nil, err
		}
		p, err := startProc(cmd)
		if err != nil {
			return hs, nil, err
		}
		h := &helper{proc: p}
		hs = append(hs, h)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return hs, nil, fmt.Errorf("helper: %w", err)
		}
		for _, f := range strings.Split(strings.TrimSpace(line), ",") {
			p, err := strconv.Atoi(f)
			if err != nil {
				return hs, nil, fmt.Errorf("helper said %q", line)
			}
			h.ports = append(h.ports, p)
		}
		ports = append(ports, h.ports...)
		next = h.ports[len(h.ports)-1] + 1
	}
	return hs, ports, nil
}

func stopAll(hs []*helper) {
	for _, h := range hs {
		h.stop()
	}
}

func helperTicks(hs []*helper) int64 {
	var t int64
	for _, h := range hs {
		t += procTicks(h.cmd.Process.Pid)
	}
	return t
}

// clkTck is USER_HZ, the unit of /proc's CPU times on Linux.
const clkTck = 100

// procTicks is utime + stime of pid from /proc/PID/stat.
func procTicks(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

type cpuTicks struct{ busy, total int64 }

// machineTicks reads the machine's CPU line of /proc/stat.
func machineTicks() cpuTicks {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var t cpuTicks
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// memory reads VmRSS and VmHWM of pid in MiB.
func memory(pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

func countFDs(pid int) int {
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es)
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernel() string {
	data, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return "Linux " + strings.TrimSpace(string(data))
}

func versionOf(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(string(out))
}

// freePort returns a 127.0.0.1 address that was free a moment ago.
func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// raiseFileLimit raises the soft descriptor limit to the hard one and returns it; the helpers
// and pollbal inherit it (the Go runtime raises it too, but only for itself).
func raiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1 << 20
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return lim.Max
}

// fdMargin is what pollbal needs besides a connection per backend: listeners, the poller's
// epoll, its log, connections of the admin API, and room for a check's connection being
// replaced.
const fdMargin = 200

// fitting is the most backends pollbal can hold a connection to under the hard limit, rounded
// down to a hundred.
func fitting(hard uint64) int {
	if hard < 2*fdMargin {
		return 1
	}
	return int(hard-fdMargin) / 100 * 100
}

// serve is the helper: it listens on n free ports of 127.0.0.1 from -from upwards, prints them
// on one line, comma-separated, and answers GET /pool on each until it is told to stop.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	from := fs.Int("from", 10000, "first port to try")
	n := fs.Int("n", 1000, "listeners")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raiseFileLimit()
	var lns []net.Listener
	var ports []string
	for p := *from; len(lns) < *n; p++ {
		if p > 65535 {
			return fmt.Errorf("only %d free ports from %d", len(lns), *from)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			if errors.Is(err, syscall.EMFILE) {
				return fmt.Errorf("descriptor limit reached at %d listeners: %w", len(lns), err)
			}
			continue // taken by someone else
		}
		lns = append(lns, ln)
		ports = append(ports, strconv.Itoa(p))
	}
	fmt.Println(strings.Join(ports, ","))
	for _, ln := range lns {
		go acceptLoop(ln)
	}
	select {} // until the parent's SIGTERM ends the process
}

func acceptLoop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: try again shortly
			continue
		}
		go answer(c)
	}
}

// poolAnswer is the whole answer to GET /pool.
const poolAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 15\r\n\r\nweb serving v1\n"

// answer serves one keep-alive connection: every request (a GET without a body, as pollbal's
// checks are) gets poolAnswer.
func answer(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 1024)
	for {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 { // the blank line that ends the headers
				break
			}
		}
		if _, err := io.WriteString(c, poolAnswer); err != nil {
			return
		}
	}
}
