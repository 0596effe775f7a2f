#!/usr/bin/env bash
# run.sh - side-by-side HTTP reverse-proxy benchmark on 127.0.0.1.
#
# Starts 2 backends (bench/backend), then haproxy, nginx, caddy and the
# fasthttp reference proxy (bench/refproxy) in front of them, and measures
# each target with wrk in interleaved rounds (A B C D A B C D) so that drift
# shows. Prints one table and writes it, with the command, the date and the
# machine, to bench/results/results-<date>_<time>.md.
# Install the peers first with bench/setup.sh; `make bench-harness` runs this
# with pollbal added as the extra target.
#
# Usage:  bench/run.sh [--proxy-cmd CMD] [--proxy-addr HOST:PORT] [--proxy-name NAME]
#
# Extra target (the hook for pollbal or any other proxy), env or flags:
#   PROXY_CMD   shell command that starts the proxy in the FOREGROUND (no
#               daemonizing); run from the caller's working directory.
#               Placeholders: {ADDR} listen host:port, {HOST}, {PORT},
#               {BACKENDS} comma-separated backend host:port list.
#               Also exported to it: BENCH_LISTEN, BENCH_BACKENDS.
#   PROXY_ADDR  where it listens (default 127.0.0.1:$((BASE_PORT+19))); loopback only
#   PROXY_NAME  label in the table (default "extra")
#   e.g. PROXY_CMD='/path/pollbal -listen {ADDR} -backends {BACKENDS}' bench/run.sh
# A second extra target, to measure two settings side by side: PROXY2_CMD,
#   PROXY2_ADDR (default 127.0.0.1:$((BASE_PORT+18))), PROXY2_NAME (default
#   "extra2"), the same way; each extra target also gets BENCH_TMP, a directory
#   of its own in the run's temp dir. `make bench-accesslog` runs pollbal with
#   the access log off and on (bench/pollbal.sh POLLBAL_ACCESS_LOG) next to
#   nginx and nginx-log.
#
# Knobs (env, defaults in brackets):
#   DURATION [8] seconds per measured run   CONNS [50]   THREADS [1]
#   ROUNDS [2]    WARMUP [1] seconds per target before round 1 (0 = none)
#   GAP [1] seconds idle between runs       BASE_PORT [18080]
#   TARGETS ["direct haproxy nginx caddy refproxy"]  (extras are appended;
#                 nginx-log, nginx with access_log combined buffer=64k to a
#                 file, can be named too)
#   URL_PATH [/]  path requested (/ = 1 KiB body, /pool = 14 bytes, /204 = no body)
#   WRK_SCRIPT [] a wrk Lua script (-s) that picks the requests, e.g.
#                 bench/mix204.lua (one request in ten to /204)
#   PIN [0]       1 = wrk on the last CPU, every server on the others (taskset)
#   OUT_DIR [bench/results]  where results-<date>_<time>.md goes
#   KEEP [0]      1 = keep the temp dir (configs, logs, raw wrk output)
#   MAX_SECONDS [180]  refuse settings whose estimated run time is longer
#   READY_TIMEOUT [15] seconds a server gets to answer after start
#   TLS [0]       1 = the proxies terminate TLS (a self-signed ECDSA P-256
#                 certificate made with openssl) and wrk asks for https://;
#                 TARGETS then defaults to "nginx" (nginx and nginx-log are
#                 the peers set up for TLS) and the extra targets get
#                 BENCH_TLS_CERT/BENCH_TLS_KEY
#
# Every process it starts is ended by PID (and its descendants by PID) on
# exit, Ctrl-C or error. Everything listens on 127.0.0.1 only.
set -Eeuo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
ORIG_PWD=$PWD
BENCH_SCRIPT=run.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"
INVOCATION=$(with_knobs "$0${*:+ $*}" DURATION CONNS THREADS ROUNDS WARMUP GAP BASE_PORT TARGETS URL_PATH WRK_SCRIPT PIN TLS MAX_SECONDS PROXY_NAME PROXY_ADDR PROXY_CMD PROXY2_NAME PROXY2_ADDR PROXY2_CMD POLLBAL_CAPACITY POLLBAL_EXTRA POLLBAL_ACCESS_LOG POLLBAL_ACCESS_LOG_FORMAT)
export PATH=/usr/local/go/bin:$PATH

bench_defaults
DURATION=${DURATION:-8}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-1}
if [ "$TLS" = 1 ]; then
  TARGETS=${TARGETS:-"nginx"}
else
  TARGETS=${TARGETS:-"direct haproxy nginx caddy refproxy"}
fi
MAX_SECONDS=${MAX_SECONDS:-180}

while [ $# -gt 0 ]; do
  case $1 in
    --proxy-cmd|--proxy-addr|--proxy-name) proxy_flag "$1" "$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -Eeuo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

# shellcheck disable=SC2046 # openssl is one word or none
bench_require wrk haproxy nginx caddy curl go ss taskset $([ "$TLS" = 1 ] && echo openssl)
bench_targets

# --- time bound -------------------------------------------------------------
NT=${#TLIST[@]}
EST=$(( 12 + NT * (WARMUP + 1) + ROUNDS * NT * (DURATION + GAP + 1) ))
[ "$EST" -le "$MAX_SECONDS" ] || die "estimated ${EST}s > MAX_SECONDS=$MAX_SECONDS; lower ROUNDS/DURATION or raise MAX_SECONDS"

bench_pin
bench_init
bench_build
bench_start

# --- measurement helpers --------------------------------------------------------
to_ms() { # wrk latency "301.00us" / "1.02ms" / "2.00s" -> ms
  awk -v v="$1" 'BEGIN{ if (v ~ /us$/) {sub(/us$/,"",v); printf "%.3f", v/1000}
                       else if (v ~ /ms$/) {sub(/ms$/,"",v); printf "%.3f", v}
                       else if (v ~ /m$/)  {sub(/m$/,"",v);  printf "%.3f", v*60000}
                       else if (v ~ /s$/)  {sub(/s$/,"",v);  printf "%.3f", v*1000}
                       else printf "nan" }'
}
TSV=$RUN/results.tsv
: >"$TSV"

run_wrk() { # run_wrk TARGET DURATION OUTFILE  (in the background, so a signal interrupts the wait)
  local t=$1 d=$2 out=$3
  local script=()
  [ -n "${WRK_SCRIPT:-}" ] && script=(-s "$WRK_SCRIPT")
  ( "${CLIENT_PREFIX[@]}" timeout $((d + 15)) wrk -t"$THREADS" -c"$CONNS" -d"${d}s" --latency "${script[@]}" "$SCHEME://${ADDR[$t]}$URL_PATH" >"$out" 2>&1 || echo "wrk exit $?" >>"$out"
    times >"$out.times" ) &
  TRANSIENT[client]=$!
  wait "${TRANSIENT[client]}" || true
  unset 'TRANSIENT[client]'
}

measure() { # measure ROUND TARGET
  local r=$1 t=$2 out="$RUN/wrk-r$1-$2.txt"
  local c1 c2 c1b c2b px0 px1 be0 be1 s0 s1 w0 w1
  c1=$(be_count "${BE_PORTS[0]}"); c2=$(be_count "${BE_PORTS[1]}")
  px0=$(cpu_ticks "${PID_OF[$t]}"); be0=$(backend_ticks)
  s0=$(sys_cpu); w0=$EPOCHREALTIME
  run_wrk "$t" "$DURATION" "$out"
  w1=$EPOCHREALTIME; s1=$(sys_cpu)
  px1=$(cpu_ticks "${PID_OF[$t]}"); be1=$(backend_ticks)
  c1b=$(be_count "${BE_PORTS[0]}"); c2b=$(be_count "${BE_PORTS[1]}")
  local rps p50 p99 errs nreq
  rps=$(awk '/^Requests\/sec:/{print $2}' "$out"); rps=${rps:-0}
  p50=$(to_ms "$(awk '$1=="50%"{print $2}' "$out")")
  p99=$(to_ms "$(awk '$1=="99%"{print $2}' "$out")")
  errs=$(awk '/Socket errors:/{gsub(/,/,""); s+=$4+$6+$8+$10} /Non-2xx or 3xx/{s+=$NF} /^wrk exit/{s+=1000000} END{print s+0}' "$out")
  nreq=$(awk '/requests in/{print $1}' "$out")
  local wrk_cpu sysd
  wrk_cpu=$(client_cpu "$out.times")
  sysd=$(sys_delta "$s0" "$s1")
  # columns: 1 round 2 target 3 rps 4 p50 5 p99 6 errs 7 nreq 8 req_b1 9 req_b2 10 wrk_cpu_s
  #          11 proxy_ticks 12 backend_ticks 13 wall_s 14 busy 15 total 16 steal (jiffies, all CPUs)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$r" "$t" "$rps" "$p50" "$p99" "$errs" "${nreq:-0}" \
    "$((c1b - c1))" "$((c2b - c2))" "$wrk_cpu" "$((px1 - px0))" "$((be1 - be0))" \
    "$(since "$w0" "$w1")" "$sysd" >>"$TSV"
  log "round $r  $(printf '%-10s' "$t") $(printf '%10.0f' "$rps") req/s  p50 ${p50}ms  p99 ${p99}ms  errors $errs"
}

# --- run -------------------------------------------------------------------------
log "targets: ${ACTIVE[*]}  (${ROUNDS} rounds x ${DURATION}s, wrk -t$THREADS -c$CONNS, PIN=$PIN, est. ${EST}s)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$WARMUP" -gt 0 ]; then
  for t in "${ACTIVE[@]}"; do run_wrk "$t" "$WARMUP" "$RUN/warmup-$t.txt"; done
  sleep "$GAP"
fi
for r in $(seq "$ROUNDS"); do
  for t in "${ACTIVE[@]}"; do
    measure "$r" "$t"
    sleep "$GAP"
  done
done

# --- report ------------------------------------------------------------------------
result_file results

FASTHTTP_V=$(fasthttp_version)

TABLE=$(awk -F'\t' -v hz="$HZ" -v ncpu="$NCPU" '
  { r[NR]=$1; t[NR]=$2; rps[NR]=$3+0; p50[NR]=$4+0; p99[NR]=$5+0; err[NR]=$6+0; b1[NR]=$8+0; b2[NR]=$9+0;
    wc[NR]=$10; px[NR]=$11; be[NR]=$12; wall[NR]=$13; busy[NR]=($15>0? $14/$15*ncpu : 0); st[NR]=($15>0? $16/$15*ncpu : 0);
    if ($2=="direct") d[$1]=$3+0; n=NR
    if (!($2 in seen)) { seen[$2]=1; order[++no]=$2 } }
  END {
    print "| round | target | req/s | p50 ms | p99 ms | vs direct | errors | split b1/b2 % | CPU wrk | CPU proxy | CPU backends | machine busy |"
    print "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i=1;i<=n;i++) {
      ratio = (r[i] in d && d[r[i]]>0) ? sprintf("%.2f", rps[i]/d[r[i]]) : "n/a"
      tot=b1[i]+b2[i]; split_ = tot>0 ? sprintf("%.0f/%.0f", 100*b1[i]/tot, 100*b2[i]/tot) : "-"
      pxs = (t[i]=="direct") ? "-" : sprintf("%.2f", px[i]/hz/wall[i])
      printf "| %s | %s | %.0f | %.2f | %.2f | %s | %d | %s | %.2f | %s | %.2f | %.2f / %d |\n", r[i], t[i], rps[i], p50[i], p99[i], ratio, err[i], split_, wc[i]/wall[i], pxs, be[i]/hz/wall[i], busy[i], ncpu
      sr[t[i]]+=rps[i]; s50[t[i]]+=p50[i]; s99[t[i]]+=p99[i]; cnt[t[i]]++
      if (!(t[i] in mn) || rps[i]<mn[t[i]]) mn[t[i]]=rps[i]; if (rps[i]>mx[t[i]]) mx[t[i]]=rps[i]
      if (st[i]>maxst) maxst=st[i]
    }
    print ""
    print "| target (mean of rounds) | req/s | min-max spread | p50 ms | p99 ms | vs direct |"
    print "|---|---:|---:|---:|---:|---:|"
    for (k=1;k<=no;k++) { x=order[k]; m=sr[x]/cnt[x]
      dr = ("direct" in sr) ? sprintf("%.2f", m/(sr["direct"]/cnt["direct"])) : "n/a"
      printf "| %s | %.0f | %.1f%% | %.2f | %.2f | %s |\n", x, m, (m>0?100*(mx[x]-mn[x])/m:0), s50[x]/cnt[x], s99[x]/cnt[x], dr }
    printf "\nmax CPU steal seen during a run: %.2f cores\n", maxst
  }' "$TSV")

{
  echo "# Proxy benchmark $STAMP"
  echo
  result_head
  echo "- load: wrk -t$THREADS -c$CONNS -d${DURATION}s --latency GET $SCHEME://…$URL_PATH (keep-alive), $ROUNDS interleaved rounds, ${WARMUP}s warm-up per target, ${GAP}s gap; PIN=$PIN"
  [ "$TLS" = 1 ] && echo "- TLS=1: the proxies terminate TLS with one self-signed ECDSA P-256 certificate (openssl $(openssl version | awk '{print $2}')); each wrk connection does one handshake, then keeps alive"
  echo "- versions: haproxy $(vers haproxy), nginx $(vers nginx), caddy $(vers caddy), wrk $(vers wrk), $(go version | awk '{print $3}'), fasthttp $FASTHTTP_V"
  echo "- backends: 2 x bench/backend (fasthttp, 1 KiB body) on $BACKENDS; direct = wrk straight to b1"
  extra_target_lines
  [[ " ${TLIST[*]} " == *" nginx-log "* ]] && echo "- nginx-log: nginx with \`access_log <file> combined buffer=64k;\`"
  echo "- CPU columns are cores used during the run (CPU-seconds / wall seconds); wrk, proxy and backends share the same $NCPU cores, so every number includes contention"
  echo
  echo "$TABLE"
  echo
  echo "<details><summary>raw wrk output</summary>"
  echo
  echo '```'
  for f in "$RUN"/wrk-r*.txt; do echo "== $(basename "$f" .txt)"; cat "$f"; done
  echo '```'
  echo "</details>"
} >"$RESULT"

bench_done
