#!/usr/bin/env bash
# h2load.sh - HTTP/2 benchmark on 127.0.0.1: pollbal against NGINX.
#
# Starts 2 backends (bench/backend), NGINX (`http2 on`) and pollbal (bench/pollbal.sh, HTTP/2 on
# by default with TLS) in front of them, both terminating TLS with the same self-signed
# certificate, and measures each with h2load (nghttp2-client) at 1, 10 and 100 streams per
# connection (-m), in interleaved rounds (for each round, for each -m: nginx, pollbal), so that
# drift shows. Prints one table, with the ratio pollbal/nginx of req/s per -m, and writes it,
# with the command, the date and the machine, to bench/results/results-h2-<date>_<time>.md.
# `make bench-h2` runs it; install NGINX with bench/setup.sh, h2load with
# `apt-get install nghttp2-client`.
#
# Usage:  bench/h2load.sh
#
# Knobs (env, defaults in brackets):
#   DURATION [8] seconds per measured run   CONNS [10] connections   THREADS [1]
#   STREAMS ["1 10 100"] streams per connection (h2load -m), one column each
#   ROUNDS [2]    WARMUP [1] seconds of h2load warm-up per run (0 = none)
#   GAP [1] seconds idle between runs       BASE_PORT [18380]
#   URL_PATH [/]  path requested (/ = 1 KiB body)
#   PIN [0]       1 = h2load on the last CPU, every server on the others (taskset)
#   OUT_DIR [bench/results]  KEEP [0] (1 = keep the temp dir)  MAX_SECONDS [300]
#   READY_TIMEOUT [15]  POLLBAL_BIN, POLLBAL_CAPACITY, POLLBAL_EXTRA: as for bench/pollbal.sh
#
# Every process it starts is ended by PID (and its descendants by PID) on
# exit, Ctrl-C or error. Everything listens on 127.0.0.1 only.
set -Eeuo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
ORIG_PWD=$PWD
INVOCATION="$0${*:+ $*}"
for v in DURATION CONNS THREADS STREAMS ROUNDS WARMUP GAP BASE_PORT URL_PATH PIN MAX_SECONDS POLLBAL_CAPACITY POLLBAL_EXTRA; do
  [ -n "${!v+x}" ] && INVOCATION="$v=${!v@Q} $INVOCATION"
done
export PATH=/usr/local/go/bin:$PATH

case ${1:-} in
  -h|--help) sed -n '2,/^set -Eeuo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "h2load.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac

DURATION=${DURATION:-8}
CONNS=${CONNS:-10}
THREADS=${THREADS:-1}
STREAMS=${STREAMS:-"1 10 100"}
ROUNDS=${ROUNDS:-2}
WARMUP=${WARMUP:-1}
GAP=${GAP:-1}
BASE_PORT=${BASE_PORT:-18380}
URL_PATH=${URL_PATH:-/}
PIN=${PIN:-0}
OUT_DIR=${OUT_DIR:-$BENCH_DIR/results}
KEEP=${KEEP:-0}
MAX_SECONDS=${MAX_SECONDS:-300}
READY_TIMEOUT=${READY_TIMEOUT:-15}
# Fixed: TLS, NGINX with HTTP/2, pollbal as the extra target.
TLS=1
NGINX_HTTP2=1
TARGETS=nginx
PROXY_CMD="$BENCH_DIR/pollbal.sh"
PROXY_ADDR=
PROXY_NAME=pollbal
PROXY2_CMD='' PROXY2_ADDR='' PROXY2_NAME=''

BENCH_SCRIPT=h2load.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a whole number of seconds >= 1"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP must be a whole number of seconds"
for m in $STREAMS; do [[ $m =~ ^[1-9][0-9]*$ ]] || die "STREAMS: '$m' is not a number >= 1"; done
bench_require h2load nginx curl go ss taskset openssl
cd "$REPO_DIR"
bench_targets

read -r -a MLIST <<<"$STREAMS"
EST=$(( 15 + ROUNDS * ${#MLIST[@]} * ${#TLIST[@]} * (WARMUP + DURATION + GAP + 1) ))
[ "$EST" -le "$MAX_SECONDS" ] || die "estimated ${EST}s > MAX_SECONDS=$MAX_SECONDS; lower ROUNDS/DURATION or raise MAX_SECONDS"

bench_pin
bench_init
bench_build
bench_start
for t in "${TLIST[@]}"; do
  [[ " ${ACTIVE[*]} " == *" $t "* ]] || die "$t failed the sanity check; no ratio without it"
done

TSV=$RUN/results.tsv
: >"$TSV"

run_h2load() { # run_h2load TARGET STREAMS OUTFILE (in the background, so a signal interrupts the wait)
  local t=$1 m=$2 out=$3 warm=()
  [ "$WARMUP" -gt 0 ] && warm=(--warm-up-time="${WARMUP}s")
  ( "${CLIENT_PREFIX[@]}" timeout $((WARMUP + DURATION + 20)) h2load -D "${DURATION}s" "${warm[@]}" \
      -c "$CONNS" -m "$m" -t "$THREADS" "https://${ADDR[$t]}$URL_PATH" >"$out" 2>&1 || echo "h2load exit $?" >>"$out" ) &
  TRANSIENT[client]=$!
  wait "${TRANSIENT[client]}" || true
  unset 'TRANSIENT[client]'
}

measure() { # measure ROUND STREAMS TARGET
  local r=$1 m=$2 t=$3 out="$RUN/h2load-r$1-m$2-$3.txt"
  local px0 px1 w0 w1
  px0=$(cpu_ticks "${PID_OF[$t]}"); w0=$EPOCHREALTIME
  run_h2load "$t" "$m" "$out"
  w1=$EPOCHREALTIME; px1=$(cpu_ticks "${PID_OF[$t]}")
  local rps ok fail proto
  rps=$(awk '/^finished in/{gsub(/,/,""); print $4}' "$out"); rps=${rps:-0}
  ok=$(awk '/^requests:/{gsub(/,/,""); print $8}' "$out"); ok=${ok:-0}
  fail=$(awk '/^requests:/{gsub(/,/,""); s=$10+$12+$14} /^h2load exit/{s+=1000000} END{print s+0}' "$out")
  proto=$(awk '/^Application protocol:/{print $3}' "$out"); proto=${proto:-none}
  [ "$proto" = h2 ] || fail=$((fail + 1000000))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$m" "$t" "$rps" "$ok" "$fail" "$((px1 - px0))" \
    "$(awk -v a="$w0" -v b="$w1" 'BEGIN{printf "%.3f", b-a}')" >>"$TSV"
  log "round $r  -m $(printf '%-4s' "$m") $(printf '%-8s' "$t") $(printf '%10.0f' "$rps") req/s  protocol $proto  failed $fail"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "targets: ${ACTIVE[*]}  (${ROUNDS} rounds x -m {$STREAMS} x ${DURATION}s, h2load -c$CONNS -t$THREADS, PIN=$PIN, est. ${EST}s)"
for r in $(seq "$ROUNDS"); do
  for m in "${MLIST[@]}"; do
    for t in "${ACTIVE[@]}"; do
      measure "$r" "$m" "$t"
      sleep "$GAP"
    done
  done
done

STAMP=$(date +%Y-%m-%d_%H%M%S)
mkdir -p "$OUT_DIR" 2>/dev/null || true
RESULT=$OUT_DIR/results-h2-$STAMP.md
touch "$RESULT" 2>/dev/null || RESULT=$ORIG_PWD/results-h2-$STAMP.md

TABLE=$(awk -F'\t' -v hz="$HZ" '
  { r=$1; m=$2; t=$3; rps[m, t]+=$4; n[m, t]++; fail[m, t]+=$6; cpu[m, t]+=$7/hz/$8
    row[NR]=sprintf("| %s | %s | %s | %.0f | %d | %.2f |", r, m, t, $4, $6, $7/hz/$8)
    if (!(m in seenm)) { seenm[m]=1; ms[++nm]=m } }
  END {
    print "| round | streams/conn | target | req/s | failed | CPU proxy |"
    print "|---:|---:|---|---:|---:|---:|"
    for (i=1;i<=NR;i++) print row[i]
    print ""
    print "| streams/conn (-m) | nginx req/s | pollbal req/s | pollbal / nginx | failed (nginx, pollbal) |"
    print "|---:|---:|---:|---:|---|"
    for (k=1;k<=nm;k++) { m=ms[k]; a=rps[m,"nginx"]/n[m,"nginx"]; b=rps[m,"pollbal"]/n[m,"pollbal"]
      printf "| %s | %.0f | %.0f | %s | %d, %d |\n", m, a, b, (a>0? sprintf("%.2f", b/a) : "n/a"), fail[m,"nginx"], fail[m,"pollbal"] }
  }' "$TSV")

{
  echo "# HTTP/2 benchmark $STAMP"
  echo
  echo "- command: \`$INVOCATION\` (from $(commit_of_caller))"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  machine_line
  echo "- load: h2load -D ${DURATION}s ${WARMUP}s warm-up -c$CONNS -t$THREADS -m {$STREAMS} GET https://…$URL_PATH, $ROUNDS interleaved rounds, ${GAP}s gap; PIN=$PIN"
  echo "- TLS: one self-signed ECDSA P-256 certificate for both (openssl $(openssl version | awk '{print $2}')); ALPN h2"
  echo "- versions: nginx $(vers nginx) (http2 on), h2load $(h2load --version 2>/dev/null | awk '{print $2}'), $(go version | awk '{print $3}'), pollbal $(commit_of_caller)"
  echo "- backends: 2 x bench/backend (fasthttp, 1 KiB body, HTTP/1.1) on $BACKENDS"
  echo "- failed counts h2load's failed, errored and timed-out requests; a run whose protocol was not h2 counts 1000000"
  echo
  echo "$TABLE"
  echo
  echo "<details><summary>raw h2load output</summary>"
  echo
  echo '```'
  for f in "$RUN"/h2load-r*.txt; do echo "== $(basename "$f" .txt)"; cat "$f"; done
  echo '```'
  echo "</details>"
} >"$RESULT"

echo
echo "$TABLE"
echo
log "results written to $RESULT"
