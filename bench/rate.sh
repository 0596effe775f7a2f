#!/usr/bin/env bash
# rate.sh - constant-rate (open model) HTTP reverse-proxy benchmark on 127.0.0.1.
#
# Starts the same backends and proxies as bench/run.sh (both use bench/lib.sh)
# and sends each target a fixed request rate with vegeta (v12.13.0, built from
# the Go module proxy) over at most CONNS keep-alive connections, in
# interleaved rounds (round: rate: A B C). Per run: achieved rate, p50/p99/
# p99.9, the proxy's CPU per request, and with perf its system calls and
# context switches per request; then a mean row per rate and target with the
# ratio to nginx. Writes bench/results/rate-<date>_<time>.md.
# `make bench-rate` runs this with pollbal added as the extra target.
#
# Usage:  bench/rate.sh [--proxy-cmd CMD] [--proxy-addr HOST:PORT] [--proxy-name NAME]
#         bench/rate.sh --report TSV      the tables again, from the raw per-run numbers
#         bench/rate.sh --stats CSV RATE  one run's numbers, from vegeta results as CSV
#
# Extra targets: PROXY_CMD, PROXY_ADDR, PROXY_NAME (and PROXY2_*), exactly as
# bench/run.sh (see run.sh --help), e.g. PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal.
#
# Knobs (env, defaults in brackets):
#   RATES ["1000 3000"]  requests per second, each > 0; "max" stands for the
#                 highest rate vegeta sustains straight against backend b1,
#                 found first: unpaced, then paced from that rate down (at
#                 most CAL_TRIES [6] runs of CAL_SECONDS [5]) until achieved
#                 >= 99 %, no errors and p99 <= SUSTAIN_P99_MS [10]
#   DURATION [10] seconds per measured run   ROUNDS [2]   CONNS [50]
#   WARMUP [2]    seconds per target at the first rate before round 1 (0 = none)
#   GAP [1]       seconds idle between runs  BASE_PORT [18080]
#   TARGETS ["direct haproxy nginx"]  (extra is appended; refproxy and caddy
#                 can be named too)
#   URL_PATH [/]  path requested (/ = 1 KiB body, /pool = 14 bytes)
#   MAX_WORKERS [10000]  vegeta -max-workers: past it the pacer waits
#   PERF [auto]   count system calls and context switches with perf stat
#                 (1 = must work, 0 = off: context switches then come from /proc)
#   VEGETA_BIN    a vegeta binary to use instead of building v12.13.0
#   PIN [0]       1 = vegeta on the last CPU, every server on the others
#   OUT_DIR [bench/results]  where rate-<date>_<time>.md goes
#   KEEP [0]      1 = keep the temp dir (configs, logs, vegeta results)
#   MAX_SECONDS [300]  refuse settings whose estimated run time is longer
#   READY_TIMEOUT [15] seconds a server gets to answer after start
#
# Every process it starts is ended by PID (and its descendants by PID) on
# exit, Ctrl-C or error. Everything listens on 127.0.0.1 only.
set -Eeuo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
ORIG_PWD=$PWD
BENCH_SCRIPT=rate.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"
INVOCATION=$(with_knobs "$0${*:+ $*}" RATES DURATION ROUNDS CONNS WARMUP GAP CAL_SECONDS CAL_TRIES SUSTAIN_P99_MS BASE_PORT TARGETS URL_PATH MAX_WORKERS PERF VEGETA_BIN PIN MAX_SECONDS PROXY_NAME PROXY_ADDR PROXY_CMD PROXY2_NAME PROXY2_ADDR PROXY2_CMD POLLBAL_CAPACITY POLLBAL_EXTRA POLLBAL_ACCESS_LOG POLLBAL_ACCESS_LOG_FORMAT)
export PATH=/usr/local/go/bin:$PATH

bench_defaults
VEGETA_VERSION=v12.13.0
RATES=${RATES:-"1000 3000"}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-50}
WARMUP=${WARMUP:-2}
CAL_SECONDS=${CAL_SECONDS:-5}
CAL_TRIES=${CAL_TRIES:-6}
SUSTAIN_P99_MS=${SUSTAIN_P99_MS:-10}
TARGETS=${TARGETS:-"direct haproxy nginx"}
MAX_WORKERS=${MAX_WORKERS:-10000}
PERF=${PERF:-auto}
VEGETA_BIN=${VEGETA_BIN:-}
MAX_SECONDS=${MAX_SECONDS:-300}

MODE=bench
while [ $# -gt 0 ]; do
  case $1 in
    --report) MODE=report REPORT_TSV=${2:?--report needs a file}; shift 2 ;;
    --stats) MODE=stats STATS_CSV=${2:?--stats needs a file and a rate} STATS_RATE=${3:?--stats needs a rate}; shift 3 ;;
    --proxy-cmd|--proxy-addr|--proxy-name) proxy_flag "$1" "$2"; shift 2 ;;
    -h|--help) sed -n '2,43p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rate.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

# --- the statistics (pure: files in, numbers out; --stats and --report run them alone) ---------
# run_stats CSV RATE prints "requests achieved max_lag_ms p50 p99 p99.9 errors" (latencies in ms)
# from vegeta results as CSV lines "timestamp_ns,code,latency_ns[,...]" in any order.
# Achieved rate: (requests - 1) / (last send - first send). Lag: how far the i-th send trails
# its slot first send + i / RATE, at worst (0 when RATE is 0, unpaced). Errors: no response or
# not 2xx. Percentiles: nearest rank over every request, errors included.
run_stats() {
  local csv=$1 rate=$2 times pcts n ach lag errs
  times=$(cut -d, -f1-2 "$csv" | sort -t, -k1,1n | awk -F, -v rate="$rate" '
    NR==1 { t0=$1 }
    { i=NR-1; if (rate>0) { lag=($1-t0)/1e6 - i*1000/rate; if (lag>maxlag) maxlag=lag }
      if ($2<200 || $2>=300) err++; last=$1 }
    END { ach=(NR>1 && last>t0) ? (NR-1)/((last-t0)/1e9) : 0
          printf "%d %.1f %.3f %d", NR, ach, maxlag, err }')
  pcts=$(cut -d, -f3 "$csv" | sort -n | awk '
    { v[NR]=$1 }
    function pct(q,  k) { k=int(q*NR); if (k<q*NR) k++; if (k<1) k=1; return v[k]/1e6 }
    END { if (NR==0) { print "0.000 0.000 0.000"; exit } printf "%.3f %.3f %.3f", pct(0.50), pct(0.99), pct(0.999) }')
  read -r n ach lag errs <<<"$times"
  echo "$n $ach $lag $pcts $errs"
}

# rate_table TSV prints the tables from the raw per-run numbers (measure's columns; a header line
# starting with "round" is skipped): one row per run, then the mean of the rounds per rate and
# target with the ratio to nginx at the same rate. "-" marks a number without a source (direct
# has no proxy; without perf there are no system calls).
rate_table() {
  awk -F'\t' -v hz="$HZ" -v ncpu="$(nproc)" '
  function f2(x) { return (x=="-") ? "-" : sprintf("%.2f", x) }
  function ratio(x, y) { return (x=="-" || y=="-" || y+0<=0) ? "n/a" : sprintf("%.2f", x/y) }
  $1=="round" { next }
  { nrow++; n=$4+0; w=$18+0
    us  = ($12=="-") ? "-" : $12/hz*1e6/(n>0?n:1)
    tcu = ($15=="-") ? "-" : $15*1000/(n>0?n:1)
    sc  = ($13=="-") ? "-" : $13/(n>0?n:1)
    cs  = ($14=="-") ? "-" : $14/(n>0?n:1)
    pct = ($2>0) ? 100*$5/$2 : 0
    rows[nrow] = sprintf("| %s | %s | %s | %.0f | %.1f | %.1f | %.2f | %.2f | %.2f | %d | %d | %s | %s | %s | %s | %s | %.2f | %.1f | %.2f | %.2f / %d |",
      $1, $2, $3, $5, pct, $6, $7, $8, $9, $10, $11, f2(us), f2(tcu), f2(sc), f2(cs),
      ($12=="-") ? "-" : sprintf("%.2f", $12/hz/w), $16/w, (n>0 ? $16*1e6/n : 0), $17/hz/w, ($20>0 ? $19/$20*ncpu : 0), ncpu)
    k = $2 SUBSEP $3
    if (!(k in cnt)) { keys[++nk]=k; krate[nk]=$2; ktarget[nk]=$3 }
    cnt[k]++; sach[k]+=$5; s50[k]+=$7; s99[k]+=$8; s999[k]+=$9; serr[k]+=$10
    if (us=="-") nus[k]=1; else { sus[k]+=us; if (!(k in mn) || us<mn[k]) mn[k]=us; if (us>mx[k]) mx[k]=us }
    if (sc=="-") nsc[k]=1; else ssc[k]+=sc
    if (cs=="-") ncs[k]=1; else scs[k]+=cs
    st = ($20>0) ? $21/$20*ncpu : 0; if (st>maxst) maxst=st
  }
  END {
    print "| round | rate | target | achieved req/s | % of rate | max lag ms | p50 ms | p99 ms | p99.9 ms | errors | conns | proxy CPU µs/req | task-clock µs/req | syscalls/req | ctx sw/req | cores proxy | cores vegeta | vegeta µs/req | cores backends | machine busy |"
    print "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i=1;i<=nrow;i++) print rows[i]
    for (j=1;j<=nk;j++) { k=keys[j]; c=cnt[k]
      mus[k] = (k in nus) ? "-" : sus[k]/c
      msc[k] = (k in nsc) ? "-" : ssc[k]/c
      mcs[k] = (k in ncs) ? "-" : scs[k]/c
      m99[k] = s99[k]/c }
    print ""
    print "| rate | target (mean of rounds) | achieved req/s | p50 ms | p99 ms | p99.9 ms | errors | proxy CPU µs/req | spread | ×nginx | syscalls/req | ×nginx | ctx sw/req | ×nginx | p99 ×nginx |"
    print "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (j=1;j<=nk;j++) { k=keys[j]; c=cnt[k]; ng=krate[j] SUBSEP "nginx"; has=(ng in cnt)
      spread = (mus[k]=="-" || mus[k]<=0) ? "-" : sprintf("%.0f%%", 100*(mx[k]-mn[k])/mus[k])
      printf "| %s | %s | %.0f | %.2f | %.2f | %.2f | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", krate[j], ktarget[j],
        sach[k]/c, s50[k]/c, m99[k], s999[k]/c, serr[k], f2(mus[k]), spread, has ? ratio(mus[k], mus[ng]) : "n/a",
        f2(msc[k]), has ? ratio(msc[k], msc[ng]) : "n/a", f2(mcs[k]), has ? ratio(mcs[k], mcs[ng]) : "n/a", has ? ratio(m99[k], m99[ng]) : "n/a" }
    printf "\nmax CPU steal seen during a run: %.2f cores\n", maxst
  }' "$1"
}

case $MODE in
  stats) run_stats "$STATS_CSV" "$STATS_RATE"; exit 0 ;;
  report) rate_table "$REPORT_TSV"; exit 0 ;;
esac

# --- knobs ------------------------------------------------------------------------
# The peers' TLS set-up is run.sh's (TLS=1 there); here vegeta speaks plain HTTP/1.1.
[ "$TLS" = 0 ] || die "TLS=1 is not supported here (bench/run.sh has it)"
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
for v in DURATION ROUNDS CONNS WARMUP GAP CAL_SECONDS CAL_TRIES SUSTAIN_P99_MS MAX_WORKERS; do
  is_uint "${!v}" || die "$v must be a whole number (got '${!v}')"
done
for v in DURATION ROUNDS CONNS CAL_SECONDS CAL_TRIES SUSTAIN_P99_MS MAX_WORKERS; do
  [ "${!v}" -gt 0 ] || die "$v must be > 0"
done
[ "$MAX_WORKERS" -ge "$CONNS" ] || die "MAX_WORKERS ($MAX_WORKERS) must be >= CONNS ($CONNS)"
read -r -a RLIST <<<"$RATES"
[ ${#RLIST[@]} -gt 0 ] || die "RATES is empty"
NEED_MAX=0
for x in "${RLIST[@]}"; do
  if [ "$x" = max ]; then NEED_MAX=1; continue; fi
  if ! is_uint "$x" || [ "$x" -eq 0 ]; then die "RATES: '$x' is neither a rate > 0 nor 'max'"; fi
done
case $PERF in auto|0|1) ;; *) die "PERF must be auto, 0 or 1 (got '$PERF')" ;; esac

bench_targets

# --- time bound -------------------------------------------------------------
NT=${#TLIST[@]}
NR=${#RLIST[@]}
EST=$(( 25 + NEED_MAX * (CAL_TRIES + 1) * (CAL_SECONDS + GAP + 2) + NT * (WARMUP + 2) + ROUNDS * NR * NT * (DURATION + GAP + 2) ))
[ "$EST" -le "$MAX_SECONDS" ] || die "estimated ${EST}s > MAX_SECONDS=$MAX_SECONDS; lower ROUNDS/DURATION, fewer RATES or TARGETS, or raise MAX_SECONDS"

bench_require haproxy nginx curl go ss taskset
case " $TARGETS " in *" caddy "*) bench_require caddy ;; esac
bench_pin
bench_init

# --- perf: system calls and context switches ----------------------------------------
# perf stat attaches to the proxy with counting off and is switched on and off through its
# control FIFO, so that it counts the same window as the /proc readings around vegeta.
PERF_EVENTS=raw_syscalls:sys_enter,context-switches,task-clock
PERF_CTL="" PERF_ACK=""
perf_start() { # perf_start PIDS OUT : perf stat on PIDS (comma list) and all their threads, counting off
  local d=$RUN/perf-control
  rm -rf "$d"; mkdir "$d"; mkfifo "$d/ctl" "$d/ack"
  perf stat -x, -o "$2" -D -1 --control "fifo:$d/ctl,$d/ack" -e "$PERF_EVENTS" -p "$1" >"$2.log" 2>&1 &
  TRANSIENT[perf]=$!
  # Read-write opens of a FIFO do not wait for the other end, so a perf that failed cannot hang us.
  exec {PERF_CTL}<>"$d/ctl" {PERF_ACK}<>"$d/ack"
}
perf_cmd() { # perf_cmd enable|disable : true once perf has acknowledged it
  local ack=""
  echo "$1" >&"$PERF_CTL"
  read -r -t 10 ack <&"$PERF_ACK" || true
  [ "$ack" = ack ]
}
perf_stop() { # ends perf stat, which then writes its counts
  kill -INT "${TRANSIENT[perf]}" 2>/dev/null || true
  wait "${TRANSIENT[perf]}" || true
  unset 'TRANSIENT[perf]'
  exec {PERF_CTL}>&- {PERF_ACK}>&-
}
perf_count() { # perf_count OUT EVENT : the count, or - when perf did not count it
  awk -F, -v e="$2" '$3==e { v = ($1 ~ /^[0-9.]+$/) ? $1 : "-" } END { print (v=="") ? "-" : v }' "$1"
}

PERF_ON=0
if [ "$PERF" != 0 ]; then
  why="no perf"
  if command -v perf >/dev/null; then
    why="perf stat -e $PERF_EVENTS does not count here (root, tracefs and perf_event_paranoid decide)"
    if perf stat -x, -o "$RUN/perf-probe.txt" -e "$PERF_EVENTS" true >/dev/null 2>&1 &&
       [ "$(perf_count "$RUN/perf-probe.txt" raw_syscalls:sys_enter)" != - ]; then
      why="perf stat has no --control FIFO (perf 5.10 or later has)"
      sleep 30 &
      TRANSIENT[probe]=$!
      perf_start "${TRANSIENT[probe]}" "$RUN/perf-probe-control.txt"
      perf_cmd enable && perf_cmd disable && PERF_ON=1
      perf_stop
      kill "${TRANSIENT[probe]}" 2>/dev/null || true
      wait "${TRANSIENT[probe]}" 2>/dev/null || true
      unset 'TRANSIENT[probe]'
    fi
  fi
  if [ "$PERF_ON" = 0 ]; then
    [ "$PERF" = 1 ] && die "PERF=1 but $why"
    log "$why: no system calls per request; context switches from /proc"
  fi
fi

# --- vegeta -----------------------------------------------------------------------------
bench_build
if [ -n "$VEGETA_BIN" ]; then
  VEGETA=$VEGETA_BIN
  [ -x "$VEGETA" ] || die "VEGETA_BIN '$VEGETA' is not an executable"
else
  # go install pkg@version builds with vegeta's own go.mod and go.sum (checked against the
  # checksum database), outside this module, so this module's go.mod stays as it is.
  log "building vegeta $VEGETA_VERSION (Go module proxy)"
  (cd "$RUN" && GOFLAGS=-mod=mod GOBIN="$RUN/bin" go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION") ||
    die "could not build vegeta $VEGETA_VERSION (needs the Go module proxy or the module cache); set VEGETA_BIN"
  VEGETA=$RUN/bin/vegeta
fi
VEGETA_V=$(go version -m "$VEGETA" 2>/dev/null | awk '$1=="mod"{print $3; exit}')
VEGETA_V=${VEGETA_V:-unknown version}

bench_start

# --- measurement helpers --------------------------------------------------------
TSV=$RUN/results.tsv
: >"$TSV"

pid_tree() { # the PIDs of $1 and its descendants, comma-separated
  local p out=$1
  for p in $(descendants "$1"); do out="$out,$p"; done
  echo "$out"
}

ctx_switches() { # voluntary + involuntary context switches of every thread of the given PIDs (comma list)
  local p f total=0 n
  local -a list
  IFS=, read -r -a list <<<"$1"
  for p in "${list[@]}"; do
    for f in /proc/"$p"/task/*/status; do
      n=$(awk '/^(non)?voluntary_ctxt_switches:/{s+=$2} END{print s+0}' "$f" 2>/dev/null) || continue
      total=$((total + n))
    done
  done
  echo "$total"
}

pause() { # pause SECONDS  (in the background, so a signal interrupts the wait)
  sleep "$1" &
  TRANSIENT[sleep]=$!
  wait "${TRANSIENT[sleep]}" || true
  unset 'TRANSIENT[sleep]'
}

# run_vegeta TARGET RATE DURATION OUT: RATE 0 = no pacing, CONNS workers as fast as they go.
# Writes OUT (vegeta's results), OUT.err, OUT.times (vegeta's CPU) and OUT.conns (vegeta's
# sockets at 90 % of the run: its connections to the target, as it listens on nothing).
run_vegeta() {
  local t=$1 rate=$2 d=$3 out=$4
  local -a pace=(-rate="$rate/s" -workers="$CONNS" -max-workers="$MAX_WORKERS")
  [ "$rate" = 0 ] && pace=(-rate=0 -workers="$CONNS" -max-workers="$CONNS")
  echo "GET $SCHEME://${ADDR[$t]}$URL_PATH" >"$RUN/targets-$t.txt"
  ( "${CLIENT_PREFIX[@]}" timeout $((d + 30)) "$VEGETA" attack -targets "$RUN/targets-$t.txt" "${pace[@]}" \
      -duration "${d}s" -keepalive=true -connections "$CONNS" -max-connections "$CONNS" \
      -max-body 0 -timeout 10s -prometheus-addr= -output "$out" 2>"$out.err" || echo "vegeta exit $?" >>"$out.err"
    times >"$out.times" ) &
  TRANSIENT[client]=$!
  pause "$(awk -v d="$d" 'BEGIN{print d * 0.9}')"
  local vp c n=0
  for vp in $(descendants "${TRANSIENT[client]}"); do
    c=$(find "/proc/$vp/fd" -lname 'socket:*' 2>/dev/null | wc -l) || true
    n=$((n + ${c:-0}))
  done
  echo "$n" >"$out.conns"
  wait "${TRANSIENT[client]}" || true
  unset 'TRANSIENT[client]'
}

# analyse OUT RATE: run_stats over vegeta's results file OUT.
analyse() {
  local out=$1 csv=$1.csv
  "$VEGETA" encode -to csv "$out" | cut -d, -f1-3 >"$csv"
  run_stats "$csv" "$2"
  [ "$KEEP" = 1 ] || rm -f "$out" "$csv"
}

measure() { # measure ROUND RATE TARGET
  local r=$1 rate=$2 t=$3 out="$RUN/vegeta-r$1-$2-$3.bin"
  local pids="" perf_out="$out.perf" px0 px1 cs0=0 cs1=0 be0 be1 s0 s1 w0 w1
  [ -n "${PID_OF[$t]}" ] && pids=$(pid_tree "${PID_OF[$t]}")
  local perf_ok=0
  if [ "$PERF_ON" = 1 ] && [ -n "$pids" ]; then
    perf_start "$pids" "$perf_out"
  fi
  px0=$(cpu_ticks "${PID_OF[$t]}"); be0=$(backend_ticks)
  [ -n "$pids" ] && cs0=$(ctx_switches "$pids")
  s0=$(sys_cpu); w0=$EPOCHREALTIME
  if [ -n "${TRANSIENT[perf]:-}" ]; then perf_cmd enable && perf_ok=1; fi
  run_vegeta "$t" "$rate" "$DURATION" "$out"
  if [ "$perf_ok" = 1 ]; then perf_cmd disable || perf_ok=0; fi
  w1=$EPOCHREALTIME; s1=$(sys_cpu)
  px1=$(cpu_ticks "${PID_OF[$t]}"); be1=$(backend_ticks)
  [ -n "$pids" ] && cs1=$(ctx_switches "$pids")
  local sc="-" cs="-" tc="-"
  if [ -n "${TRANSIENT[perf]:-}" ]; then
    perf_stop
    if [ "$perf_ok" = 1 ]; then
      sc=$(perf_count "$perf_out" raw_syscalls:sys_enter)
      cs=$(perf_count "$perf_out" context-switches)
      tc=$(perf_count "$perf_out" task-clock)
    else
      log "WARNING: perf did not acknowledge its control commands for $t (see $perf_out.log with KEEP=1)"
    fi
  elif [ -n "$pids" ]; then
    cs=$((cs1 - cs0))
  fi
  local n ach lag p50 p99 p999 errs
  read -r n ach lag p50 p99 p999 errs <<<"$(analyse "$out" "$rate")"
  local gen_cpu conns
  gen_cpu=$(client_cpu "$out.times")
  conns=$(cat "$out.conns")
  grep -q . "$out.err" && { log "vegeta said:"; head -5 "$out.err" >&2; }
  local sysd
  sysd=$(sys_delta "$s0" "$s1")
  # columns: 1 round 2 rate 3 target 4 requests 5 achieved 6 max_lag_ms 7 p50 8 p99 9 p99.9 10 errors
  #          11 conns 12 proxy_ticks 13 syscalls 14 ctx_switches 15 task_clock_ms 16 vegeta_cpu_s
  #          17 backend_ticks 18 wall_s 19 busy 20 total 21 steal (jiffies, all CPUs)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$r" "$rate" "$t" "$n" "$ach" "$lag" "$p50" "$p99" "$p999" "$errs" "$conns" \
    "$([ -n "$pids" ] && echo $((px1 - px0)) || echo -)" "$sc" "$cs" "$tc" "$gen_cpu" "$((be1 - be0))" \
    "$(since "$w0" "$w1")" "$sysd" >>"$TSV"
  log "round $r  $(printf '%6s/s %-10s' "$rate" "$t") achieved $(printf '%8.0f' "$ach")  p50 ${p50}ms  p99 ${p99}ms  p99.9 ${p999}ms  errors $errs"
}

# --- the highest rate the generator sustains: vegeta straight against b1 ----------------------
# First unpaced (-rate=0, CONNS workers): the most vegeta and one backend do on these cores.
# Then paced, from that rate down, until a rate is sustained: achieved >= 99 % of it, no errors,
# p99 <= SUSTAIN_P99_MS (past that, requests queue for the CONNS connections). Each next try is a
# fifth lower, or 95 % of what the last one achieved if that is lower still.
cal_run() { # cal_run RATE : one run against b1; sets CAL (achieved, errors, p99) and CAL_SUMMARY
  local out=$RUN/vegeta-calibration-$1.bin t0 t1 w0 w1 n ach p50 p99 errs
  t0=$(cpu_ticks "${PID_OF[b1]}"); w0=$EPOCHREALTIME
  run_vegeta direct "$1" "$CAL_SECONDS" "$out"
  w1=$EPOCHREALTIME; t1=$(cpu_ticks "${PID_OF[b1]}")
  read -r n ach _ p50 p99 _ errs <<<"$(analyse "$out" "$1")"
  CAL=("$ach" "$errs" "$p99")
  CAL_SUMMARY=$(awk -v r="$1" -v n="$n" -v a="$ach" -v p50="$p50" -v p99="$p99" -v e="$errs" -v g="$(client_cpu "$out.times")" \
      -v b="$((t1 - t0))" -v hz="$HZ" -v w="$(since "$w0" "$w1")" \
    'BEGIN{printf "%s: %.0f req/s, %d errors, p50 %.2f ms, p99 %.2f ms, vegeta %.2f cores, b1 %.2f cores", (r==0 ? "unpaced" : r "/s"), a, e, p50, p99, g/w, b/hz/w}')
  log "$CAL_SUMMARY"
  pause "$GAP"
}
CAL_LINE=""
if [ "$NEED_MAX" = 1 ]; then
  log "finding the highest rate vegeta sustains against b1 (${CAL_SECONDS}s runs)"
  cal_run 0
  CAL_LINE=$CAL_SUMMARY
  MAX_RATE=$(awk -v a="${CAL[0]}" 'BEGIN{printf "%d", int(a/100)*100}')
  sustained=0
  for _ in $(seq "$CAL_TRIES"); do
    [ "$MAX_RATE" -ge 100 ] || break
    cal_run "$MAX_RATE"
    CAL_LINE="$CAL_LINE; $CAL_SUMMARY"
    if awk -v r="$MAX_RATE" -v a="${CAL[0]}" -v e="${CAL[1]}" -v p="${CAL[2]}" -v lim="$SUSTAIN_P99_MS" \
         'BEGIN{exit !(a >= 0.99*r && e == 0 && p <= lim)}'; then
      sustained=1; break
    fi
    MAX_RATE=$(awk -v r="$MAX_RATE" -v a="${CAL[0]}" 'BEGIN{n=0.8*r; if (0.95*a < n) n=0.95*a; printf "%d", int(n/100)*100}')
  done
  [ "$sustained" = 1 ] || die "vegeta sustained none of the rates tried against b1 ($CAL_LINE); give RATES as numbers"
  CAL_LINE="- max: vegeta straight against b1, ${CAL_SECONDS}s each, $CONNS connections; $CAL_LINE; \"max\" in RATES = $MAX_RATE req/s (achieved >= 99 %, no errors, p99 <= ${SUSTAIN_P99_MS} ms)"
  log "max = $MAX_RATE req/s"
  for i in "${!RLIST[@]}"; do [ "${RLIST[$i]}" = max ] && RLIST[i]=$MAX_RATE; done
fi

# --- run -------------------------------------------------------------------------
log "targets: ${ACTIVE[*]}  rates: ${RLIST[*]} req/s  (${ROUNDS} rounds x ${DURATION}s, vegeta $VEGETA_V, CONNS=$CONNS, perf=$PERF_ON, PIN=$PIN, est. ${EST}s)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$WARMUP" -gt 0 ]; then
  for t in "${ACTIVE[@]}"; do run_vegeta "$t" "${RLIST[0]}" "$WARMUP" "$RUN/warmup-$t.bin"; done
  [ "$KEEP" = 1 ] || rm -f "$RUN"/warmup-*.bin
  pause "$GAP"
fi
for r in $(seq "$ROUNDS"); do
  for rate in "${RLIST[@]}"; do
    for t in "${ACTIVE[@]}"; do
      measure "$r" "$rate" "$t"
      pause "$GAP"
    done
  done
done

# --- report ------------------------------------------------------------------------
result_file rate

TABLE=$(rate_table "$TSV")

if [ "$PERF_ON" = 1 ]; then
  SRC_LINE="- sources: proxy CPU µs/req from /proc/PID/stat utime+stime (clock ticks of 1/${HZ} s) of the proxy and its descendants over the run; task-clock µs/req, syscalls/req (raw_syscalls:sys_enter) and ctx sw/req (context-switches) from \`perf stat -p\` on the same processes and all their threads ($(perf --version 2>/dev/null)), counting switched on just before vegeta starts and off just after it exits (perf's control FIFO), the window of the /proc readings; per request = divided by the requests vegeta sent"
else
  SRC_LINE="- sources: proxy CPU µs/req from /proc/PID/stat utime+stime (clock ticks of 1/${HZ} s) of the proxy and its descendants over the run; no perf (PERF=$PERF): no task-clock or syscalls, ctx sw/req from voluntary+nonvoluntary_ctxt_switches of every live thread in /proc/PID/task/*/status; per request = divided by the requests vegeta sent"
fi

{
  echo "# Constant-rate benchmark $STAMP"
  echo
  result_head
  echo "- load: vegeta attack -rate R/s -duration ${DURATION}s -keepalive -connections $CONNS -max-connections $CONNS -workers $CONNS -max-workers $MAX_WORKERS -max-body 0, GET http://…$URL_PATH; rates ${RLIST[*]} req/s; $ROUNDS interleaved rounds (each round: each rate: each target), ${WARMUP}s warm-up per target, ${GAP}s gap; PIN=$PIN"
  [ -n "$CAL_LINE" ] && echo "$CAL_LINE"
  echo "- versions: haproxy $(vers haproxy), nginx $(vers nginx), caddy $(vers caddy), vegeta $VEGETA_V, $(go version | awk '{print $3}'), fasthttp $(fasthttp_version)"
  echo "- backends: 2 x bench/backend (fasthttp, 1 KiB body) on $BACKENDS; direct = vegeta straight to b1"
  extra_target_lines
  echo "$SRC_LINE"
  echo "- achieved req/s = (requests - 1) / (last send - first send); max lag = how far a send trailed its slot in the schedule at worst; latency from the send to the end of the response (nearest rank, errors included); conns = vegeta's open sockets (its connections to the target) at 90 % of the run"
  echo "- cores columns are CPU-seconds / wall seconds; vegeta, the proxy and the backends share the same $NCPU cores"
  echo
  echo "$TABLE"
  echo
  echo "<details><summary>raw per-run numbers (tab-separated; proxy and backend CPU in clock ticks, task-clock in ms)</summary>"
  echo
  echo '```'
  echo "round	rate	target	requests	achieved	max_lag_ms	p50_ms	p99_ms	p99.9_ms	errors	conns	proxy_ticks	syscalls	ctx_switches	task_clock_ms	vegeta_cpu_s	backend_ticks	wall_s	busy	total	steal"
  cat "$TSV"
  echo '```'
  echo "</details>"
} >"$RESULT"

bench_done
