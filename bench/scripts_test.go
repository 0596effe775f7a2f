package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pollbal/internal/certs/certstest"
	"pollbal/internal/testproc"
)

// scripts are run; lib.sh is sourced by run.sh and rate.sh, so it is checked but not executable.
var scripts = []string{"run.sh", "rate.sh", "setup.sh", "pollbal.sh", "bigbody.sh", "upgrade.sh", "h2load.sh"}

func TestScriptsParse(t *testing.T) {
	if out, err := exec.Command("bash", "-n", "lib.sh").CombinedOutput(); err != nil {
		t.Fatalf("bash -n lib.sh: %v\n%s", err, out)
	}
	for _, s := range scripts {
		t.Run(s, func(t *testing.T) {
			if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
				t.Fatalf("bash -n %s: %v\n%s", s, err, out)
			}
			fi, err := os.Stat(s)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&0o111 == 0 {
				t.Fatalf("%s is not executable (mode %v)", s, fi.Mode())
			}
		})
	}
}

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (CI installs it)")
	}
	// .shellcheckrc lets it follow lib.sh from run.sh and rate.sh, as -x would.
	for _, s := range append([]string{"lib.sh"}, scripts...) {
		t.Run(s, func(t *testing.T) {
			if out, err := exec.Command(bin, s).CombinedOutput(); err != nil {
				t.Fatalf("shellcheck %s: %v\n%s", s, err, out)
			}
		})
	}
}

// TestRunHelpDocumentsTheHook checks that --help prints the header comment (the line range in
// run.sh follows the comment's length) without starting anything.
func TestRunHelpDocumentsTheHook(t *testing.T) {
	out, err := exec.Command("./run.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, want := range []string{"PROXY_CMD", "PROXY2_CMD", "nginx-log", "READY_TIMEOUT", "127.0.0.1 only"} {
		if !strings.Contains(help, want) {
			t.Errorf("run.sh --help does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "set -E") {
		t.Errorf("run.sh --help prints code past the header comment:\n%s", help)
	}
}

// TestHarnessIsSelfContained is the regression test for issue 14: the harness needed a
// ../shared/bench checkout next to the repository, so `make bench-harness` failed on a clone.
func TestHarnessIsSelfContained(t *testing.T) {
	files := []string{"../Makefile", "../README.md", "README.md"}
	files = append(files, scripts...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "../shared") {
			t.Errorf("%s refers to ../shared, which a clone does not have", filepath.Clean(f))
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "bench/run.sh") {
		t.Error("Makefile's bench-harness target does not run bench/run.sh")
	}
	if !strings.Contains(string(mk), "PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal bench/rate.sh") {
		t.Error("Makefile's bench-rate target does not run bench/rate.sh with pollbal as the extra target")
	}
}

// TestPollbalConfigPassesCheck runs bench/pollbal.sh with a stand-in binary that checks the
// configuration it is given with the real `pollbal check` instead of serving, so the harness's
// pollbal target keeps up with the configuration schema.
func TestPollbalConfigPassesCheck(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "pollbal")
	if err := testproc.GoBuild(real, "../cmd/pollbal", false); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(dir, "stub")
	// pollbal.sh execs "$POLLBAL_BIN run -config FILE".
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n[ \"$1\" = run ] && [ \"$2\" = -config ] || exit 9\nexec "+real+" check -config \"$3\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		extra     string
		tls       bool
		accessLog string // POLLBAL_ACCESS_LOG
		format    string // POLLBAL_ACCESS_LOG_FORMAT
	}{
		{name: "defaults"},
		{name: "with POLLBAL_EXTRA", extra: "  slow_start: 0s"},
		{name: "TLS (run.sh TLS=1)", tls: true},
		{name: "access log in BENCH_TMP", accessLog: "access.log"},
		{name: "combined access log on standard output", accessLog: "-", format: "combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			benchTmp := t.TempDir()
			cmd := exec.Command("./pollbal.sh")
			cmd.Env = append(os.Environ(), "BENCH_LISTEN=127.0.0.1:18099", "BENCH_BACKENDS=127.0.0.1:18081,127.0.0.1:18082",
				"POLLBAL_BIN="+stub, "POLLBAL_EXTRA="+tc.extra, "TMPDIR="+t.TempDir(), "BENCH_TMP="+benchTmp,
				"POLLBAL_ACCESS_LOG="+tc.accessLog, "POLLBAL_ACCESS_LOG_FORMAT="+tc.format)
			if tc.tls {
				pair := certstest.Write(t, t.TempDir(), "bench", certstest.Options{}, "bench.test")
				cmd.Env = append(cmd.Env, "BENCH_TLS_CERT="+pair.CertFile, "BENCH_TLS_KEY="+pair.KeyFile)
			}
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Fatalf("pollbal.sh's configuration does not pass pollbal check: %v\n%s", err, out)
			}
			// check opens the access log's file as run does: it is where the knob said.
			_, err = os.Stat(filepath.Join(benchTmp, "access.log"))
			if tc.accessLog == "access.log" && err != nil {
				t.Errorf("POLLBAL_ACCESS_LOG=access.log: no access.log in BENCH_TMP: %v", err)
			}
			if tc.accessLog != "access.log" && err == nil {
				t.Errorf("POLLBAL_ACCESS_LOG=%q made an access.log in BENCH_TMP", tc.accessLog)
			}
		})
	}
}

// sourceLib runs script in bash after sourcing lib.sh with env (the caller's settings) and
// returns its output and error.
func sourceLib(t *testing.T, env []string, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail; . ./lib.sh; "+script)
	cmd.Env = append(append(os.Environ(), "BENCH_SCRIPT=lib", "TLS=0", "BASE_PORT=18080", "PROXY_ADDR=",
		"PROXY_NAME=extra", "PROXY_CMD=", "PROXY2_CMD=", "PROXY2_ADDR=", "PROXY2_NAME=", "RUN="+t.TempDir()), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTwoExtraTargets: PROXY2_CMD adds a second extra target after the first, on its own port;
// a name that clashes, or a second target without a first, is refused.
func TestTwoExtraTargets(t *testing.T) {
	out, err := sourceLib(t, []string{"TARGETS=nginx nginx-log", "PROXY_CMD=bench/pollbal.sh", "PROXY_NAME=pollbal",
		"PROXY2_CMD=POLLBAL_ACCESS_LOG=access.log bench/pollbal.sh", "PROXY2_NAME=pollbal-log"},
		`bench_targets; echo "${TLIST[*]}|${ADDR[pollbal]}|${ADDR[pollbal-log]}|${ADDR[nginx-log]}"; is_extra pollbal-log && is_extra pollbal && ! is_extra nginx-log && echo extras`)
	if want := "nginx nginx-log pollbal pollbal-log|127.0.0.1:18099|127.0.0.1:18098|127.0.0.1:18095\nextras\n"; err != nil || out != want {
		t.Errorf("two extra targets: %v\n%q, want\n%q", err, out, want)
	}
	out, err = sourceLib(t, []string{"TARGETS=nginx", "PROXY_CMD=a"}, `bench_targets; echo "${TLIST[*]}"`)
	if err != nil || out != "nginx extra\n" {
		t.Errorf("one extra target: %v\n%q", err, out)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"the same name twice", []string{"TARGETS=nginx", "PROXY_CMD=a", "PROXY_NAME=p", "PROXY2_CMD=b", "PROXY2_NAME=p"}, "PROXY2_NAME 'p' clashes"},
		{"a built-in's name", []string{"TARGETS=nginx", "PROXY_CMD=a", "PROXY2_CMD=b", "PROXY2_NAME=nginx-log"}, "PROXY2_NAME 'nginx-log' clashes"},
		{"a second without a first", []string{"TARGETS=nginx", "PROXY2_CMD=b"}, "PROXY2_CMD given without PROXY_CMD"},
		{"an address off loopback", []string{"TARGETS=nginx", "PROXY_CMD=a", "PROXY2_CMD=b", "PROXY2_ADDR=10.0.0.1:80"}, "loopback only"},
	} {
		out, err := sourceLib(t, tc.env, "bench_targets")
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %v\n%s\nwant a refusal with %q", tc.name, err, out, tc.want)
		}
	}
}

// TestNginxLogTarget: nginx-log is nginx with an access log in the combined format, buffered
// 64 KiB, to a file of its own; nginx keeps its log off. nginx -t accepts both, when installed.
func TestNginxLogTarget(t *testing.T) {
	out, err := sourceLib(t, []string{"TARGETS=nginx nginx-log"},
		`bench_targets; write_nginx nginx; write_nginx nginx-log; grep -h 'access_log\|listen' "$RUN/nginx/nginx.conf" "$RUN/nginx-log/nginx.conf"; echo "$RUN"`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	run := lines[len(lines)-1]
	want := []string{"access_log off;", "listen 127.0.0.1:18092;",
		"access_log " + run + "/nginx-log/access.log combined buffer=64k;", "listen 127.0.0.1:18095;"}
	if got := lines[:len(lines)-1]; strings.Join(trimAll(got), "|") != strings.Join(want, "|") {
		t.Errorf("nginx configurations have\n%q\nwant\n%q", got, want)
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed: the configuration's syntax is not checked")
	}
	for _, name := range []string{"nginx", "nginx-log"} {
		d := filepath.Join(run, name)
		if out, err := exec.Command(nginx, "-t", "-q", "-p", d, "-e", filepath.Join(d, "error.log"), "-c", filepath.Join(d, "nginx.conf")).CombinedOutput(); err != nil {
			t.Errorf("nginx -t on %s's configuration: %v\n%s", name, err, out)
		}
	}
}

func trimAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// TestRateHelpDocumentsTheKnobs checks that rate.sh --help prints the whole header comment (the
// line range in rate.sh follows the comment's length) without starting anything.
func TestRateHelpDocumentsTheKnobs(t *testing.T) {
	out, err := exec.Command("./rate.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("rate.sh --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, want := range []string{"RATES", "PERF", "VEGETA_BIN", "MAX_WORKERS", "PROXY_CMD", "--report", "127.0.0.1 only"} {
		if !strings.Contains(help, want) {
			t.Errorf("rate.sh --help does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "set -E") {
		t.Errorf("rate.sh --help prints code past the header comment:\n%s", help)
	}
}

// TestRateRefusesBadSettings checks that rate.sh stops on each bad knob with a message naming
// it. MAX_SECONDS=1 in every case makes sure a setting that slipped through could not start a
// benchmark: the time bound would stop it, and the message would not match.
func TestRateRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"rate not a number", []string{"RATES=1000 fast"}, "RATES: 'fast'"},
		{"rate zero", []string{"RATES=0"}, "RATES: '0'"},
		{"duration not a number", []string{"DURATION=5s"}, "DURATION must be a whole number"},
		{"no rounds", []string{"ROUNDS=0"}, "ROUNDS must be > 0"},
		{"fewer workers than connections", []string{"CONNS=50", "MAX_WORKERS=10"}, "MAX_WORKERS (10) must be >= CONNS (50)"},
		{"perf setting", []string{"PERF=yes"}, "PERF must be auto, 0 or 1"},
		{"TLS", []string{"TLS=1"}, "TLS=1 is not supported here"},
		{"unknown target", []string{"TARGETS=nginx envoy"}, "unknown target 'envoy'"},
		{"address off loopback", []string{"PROXY_CMD=true", "PROXY_ADDR=10.0.0.1:80"}, "loopback only"},
		{"time bound", nil, "estimated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("./rate.sh")
			cmd.Env = append(append(os.Environ(), "MAX_SECONDS=1"), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("rate.sh with %v succeeded:\n%s", tc.env, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("rate.sh with %v: want a message with %q, got:\n%s", tc.env, tc.want, out)
			}
		})
	}
}

// TestRateStats checks one run's numbers from vegeta's CSV results (rate.sh --stats): 1,000
// requests paced at 1,000/s, written out of order as vegeta writes them (by completion), with
// a 5 ms stall in the sender at request 500 that it then makes up, latencies 1..1000 ms, and
// two errors (no response, a 502).
func TestRateStats(t *testing.T) {
	const t0 = int64(1796212685359433795)
	var lines []string
	for i := 0; i < 1000; i++ {
		ts := t0 + int64(i)*1e6
		if i >= 500 && i < 505 { // the sender stalls at 500 and sends 500..504 together at 505 ms
			ts = t0 + 505e6
		}
		code := 200
		switch i {
		case 10:
			code = 0
		case 20:
			code = 502
		}
		lines = append(lines, fmt.Sprintf("%d,%d,%d,0,1024,,,,%d,GET,http://127.0.0.1:18092/,", ts, code, int64(1000-i)*1e6, i))
	}
	// Completion order: the reverse of the send order here.
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	csv := filepath.Join(t.TempDir(), "results.csv")
	if err := os.WriteFile(csv, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rate string
		want string // requests achieved max_lag_ms p50 p99 p99.9 errors
	}{
		{"1000", "1000 1000.0 5.000 500.000 990.000 999.000 2"},
		{"0", "1000 1000.0 0.000 500.000 990.000 999.000 2"}, // unpaced: no schedule, no lag
	} {
		out, err := exec.Command("./rate.sh", "--stats", csv, tc.rate).CombinedOutput()
		if err != nil {
			t.Fatalf("rate.sh --stats: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("rate %s: got %q, want %q", tc.rate, got, tc.want)
		}
	}
}

// TestRateReport checks the tables rate.sh prints from its raw per-run numbers (--report): the
// per-request division, the mean of the rounds, the ratios to nginx at the same rate, and "-" or
// "n/a" where a number has no source (direct has no proxy; a rate without nginx has no ratio).
func TestRateReport(t *testing.T) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		t.Fatal(err)
	}
	hz, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	// 30,000 requests in 10 s: nginx uses 0.6 CPU-seconds (20 µs/req), pollbal 0.9 (30 µs/req).
	ticks := func(cpuSeconds float64) string { return strconv.Itoa(int(cpuSeconds * float64(hz))) }
	row := func(cols ...string) string { return strings.Join(cols, "\t") }
	tsv := strings.Join([]string{
		row("round", "rate", "target", "requests", "achieved", "max_lag_ms", "p50_ms", "p99_ms", "p99.9_ms", "errors", "conns", "proxy_ticks", "syscalls", "ctx_switches", "task_clock_ms", "vegeta_cpu_s", "backend_ticks", "wall_s", "busy", "total", "steal"),
		row("1", "3000", "direct", "30000", "3000.0", "1.0", "0.1", "0.5", "1.0", "0", "3", "-", "-", "-", "-", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("1", "3000", "nginx", "30000", "3000.0", "1.0", "0.2", "1.0", "2.0", "0", "4", ticks(0.6), "180000", "60000", "600", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("1", "3000", "pollbal", "30000", "2990.0", "1.0", "0.3", "2.0", "4.0", "1", "4", ticks(0.9), "270000", "120000", "900", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("1", "1000", "pollbal", "10000", "1000.0", "1.0", "0.3", "1.0", "2.0", "0", "2", ticks(0.3), "-", "25000", "-", "1.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("2", "3000", "direct", "30000", "3000.0", "1.0", "0.1", "0.5", "1.0", "0", "3", "-", "-", "-", "-", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("2", "3000", "nginx", "30000", "3000.0", "1.0", "0.2", "1.0", "2.0", "0", "4", ticks(0.6), "180000", "60000", "600", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
		row("2", "3000", "pollbal", "30000", "3010.0", "1.0", "0.3", "4.0", "4.0", "0", "4", ticks(0.9), "270000", "120000", "900", "3.0", ticks(1), "10.0", "1000", "2000", "0"),
	}, "\n") + "\n"
	file := filepath.Join(t.TempDir(), "results.tsv")
	if err := os.WriteFile(file, []byte(tsv), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("./rate.sh", "--report", file).CombinedOutput()
	if err != nil {
		t.Fatalf("rate.sh --report: %v\n%s", err, out)
	}
	report := string(out)
	for _, want := range []string{
		// round 1, nginx: 20 µs/req from /proc and from task-clock, 6 system calls and 2 context
		// switches per request, 0.06 cores, vegeta 0.30 cores and 100 µs/req, backends 0.10 cores.
		"| 1 | 3000 | nginx | 3000 | 100.0 | 1.0 | 0.20 | 1.00 | 2.00 | 0 | 4 | 20.00 | 20.00 | 6.00 | 2.00 | 0.06 | 0.30 | 100.0 | 0.10 |",
		"| 1 | 3000 | direct | 3000 | 100.0 | 1.0 | 0.10 | 0.50 | 1.00 | 0 | 3 | - | - | - | - | - | 0.30 | 100.0 | 0.10 |",
		"| 3000 | nginx | 3000 | 0.20 | 1.00 | 2.00 | 0 | 20.00 | 0% | 1.00 | 6.00 | 1.00 | 2.00 | 1.00 | 1.00 |",
		// pollbal: the mean of 2,990 and 3,010 req/s, of p99 2 and 4 ms; 1.5x nginx's CPU and
		// system calls, 2x its context switches, 3x its p99.
		"| 3000 | pollbal | 3000 | 0.30 | 3.00 | 4.00 | 1 | 30.00 | 0% | 1.50 | 9.00 | 1.50 | 4.00 | 2.00 | 3.00 |",
		"| 3000 | direct | 3000 | 0.10 | 0.50 | 1.00 | 0 | - | - | n/a | - | n/a | - | n/a | 0.50 |",
		// no nginx at 1,000/s: no ratios; no perf: no system calls, context switches from /proc
		"| 1000 | pollbal | 1000 | 0.30 | 1.00 | 2.00 | 0 | 30.00 | 0% | n/a | - | n/a | 2.50 | n/a | n/a |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks\n%s\ngot:\n%s", want, report)
		}
	}
}

// TestUpgradeHelpAndBadSettings checks that upgrade.sh --help prints its whole header comment
// (the line range in the script follows the comment's length) and that a bad knob stops it,
// naming the knob, before it builds or starts anything.
func TestUpgradeHelpAndBadSettings(t *testing.T) {
	out, err := exec.Command("./upgrade.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("upgrade.sh --help: %v\n%s", err, out)
	}
	help := string(out)
	for _, want := range []string{"UPGRADES", "RESTARTS", "sockethold", "SIGUSR2", "non-2xx", "127.0.0.1 only", "quiet window"} {
		if !strings.Contains(help, want) {
			t.Errorf("upgrade.sh --help does not mention %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "set -E") {
		t.Errorf("upgrade.sh --help prints code past the header comment:\n%s", help)
	}
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"UPGRADES=ten", "UPGRADES must be a whole number"},
		{"SLOW_EVERY=0", "need SLOW_EVERY >= 1"},
		{"PHASES=upgrade reboot", "unknown phase 'reboot'"},
	} {
		cmd := exec.Command("./upgrade.sh")
		cmd.Env = append(os.Environ(), tc.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("upgrade.sh with %s: %v, %q; want a refusal naming %q", tc.env, err, out, tc.want)
		}
	}
}
