#!/usr/bin/env bash
# upgrade.sh - restarts and binary upgrades under load, 127.0.0.1 only. wrk sends CONNS
# keep-alive connections' worth of requests to pollbal, one in SLOW_EVERY to a backend that
# answers after SLOW_MS, the others to one that answers at once, while pollbal:
#   1. upgrade         performs UPGRADES binary upgrades in a row (SIGUSR2), with state_dir;
#   2. restart         restarts RESTARTS times through a parent that holds its sockets
#                      (bench/sockethold, as systemd's socket units do), with state_dir;
#   3. restart-nostate the same restarts without state_dir: the 503 window the state closes.
# Each phase prints wrk's requests, socket errors (connect, read, write, timeout) and non-2xx
# answers; a phase with none of either says "lost nothing". The exit status is 0 when the two
# phases with state_dir lost nothing.
#
# Knobs (environment, defaults in brackets):
#   POLLBAL_BIN [build ./cmd/pollbal]   BACKEND_BIN [build ./internal/testbackend]
#   SOCKETHOLD_BIN [build ./bench/sockethold]
#   CONNS [50]  THREADS [2]  UPGRADES [10]  RESTARTS [10]  GAP [1] seconds between two events
#   SLOW_MS [200]  SLOW_EVERY [4]  INTERVAL [1s] poll.interval  BASE_PORT [18300]
#   PHASES ["upgrade restart restart-nostate"]  KEEP [0] (1 keeps the temporary directory)
# Needs wrk, curl and go (unless every binary is given). Run it in a quiet window: it saturates
# the machine for about (UPGRADES + 2 * RESTARTS) * (GAP + 1) seconds.
set -Eeuo pipefail

if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

CONNS=${CONNS:-50}; THREADS=${THREADS:-2}; UPGRADES=${UPGRADES:-10}; RESTARTS=${RESTARTS:-10}
GAP=${GAP:-1}; SLOW_MS=${SLOW_MS:-200}; SLOW_EVERY=${SLOW_EVERY:-4}; INTERVAL=${INTERVAL:-1s}
BASE_PORT=${BASE_PORT:-18300}; PHASES=${PHASES:-"upgrade restart restart-nostate"}; KEEP=${KEEP:-0}
for v in CONNS THREADS UPGRADES RESTARTS GAP SLOW_MS SLOW_EVERY BASE_PORT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "upgrade.sh: $v must be a whole number (got '${!v}')" >&2; exit 2; }
done
[[ $SLOW_EVERY -ge 1 && $THREADS -ge 1 && $CONNS -ge $THREADS ]] || { echo "upgrade.sh: need SLOW_EVERY >= 1 and CONNS >= THREADS >= 1" >&2; exit 2; }
for p in $PHASES; do
  [[ $p =~ ^(upgrade|restart|restart-nostate)$ ]] || { echo "upgrade.sh: unknown phase '$p'" >&2; exit 2; }
done
for tool in wrk curl; do
  command -v "$tool" >/dev/null || { echo "upgrade.sh: missing '$tool'" >&2; exit 2; }
done

HOST=127.0.0.1
FAST=$HOST:$((BASE_PORT + 1)); SLOW=$HOST:$((BASE_PORT + 2))
LISTEN=$HOST:$((BASE_PORT + 10)); ADMIN=$HOST:$((BASE_PORT + 11))
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUN=$(mktemp -d /tmp/upgradebench.XXXXXX)
PIDS=() # processes this script started (and the pollbal pids it saw), ended on exit

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
alive() { # alive PID: the process runs (a zombie that nobody reaped has exited)
  [[ -e /proc/$1/stat ]] && [[ $(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) != Z ]]
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do alive "$p" || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  if [[ $KEEP = 1 ]]; then log "kept $RUN"; else rm -rf "$RUN"; fi
}
trap cleanup EXIT

build() { # build VAR PACKAGE: sets VAR to the binary given in the environment, or builds it
  local var=$1 pkg=$2
  if [[ -z ${!var:-} ]]; then
    (cd "$REPO" && go build -o "$RUN/$(basename "$pkg")" "$pkg")
    printf -v "$var" '%s' "$RUN/$(basename "$pkg")"
  fi
}
build POLLBAL_BIN ./cmd/pollbal
build BACKEND_BIN ./internal/testbackend
build SOCKETHOLD_BIN ./bench/sockethold

printf 'web serving v1\n' >"$RUN/pool"
"$BACKEND_BIN" -listen "$FAST" -id fast -pool-file "$RUN/pool" >"$RUN/fast.log" 2>&1 & PIDS+=($!)
"$BACKEND_BIN" -listen "$SLOW" -id slow -pool-file "$RUN/pool" -delay "${SLOW_MS}ms" >"$RUN/slow.log" 2>&1 & PIDS+=($!)

cat >"$RUN/mix.lua" <<LUA
-- One request in $SLOW_EVERY goes to the slow app; wrk counts every other answer than 2xx/3xx.
local n, fast, slow = 0, nil, nil
request = function()
  if fast == nil then
    fast = wrk.format("GET", "/", {Host = "www.bench"})
    slow = wrk.format("GET", "/", {Host = "slow.bench"})
  end
  n = n + 1
  if n % $SLOW_EVERY == 0 then return slow end
  return fast
end
LUA

config() { # config STATE_DIR: pollbal's configuration
  cat <<YML
site: bench
listen: $LISTEN
admin: {listen: $ADMIN}
state_dir: "$1"
poll: {interval: $INTERVAL}
services: {web: {}}
apps:
  - {name: slow, hosts: ["slow.bench"], pool: slow}
  - {name: www, hosts: ["*"]}
backends:
  - {id: fast, address: $FAST, capacity: 1000}
  - {id: slow, address: $SLOW, capacity: 1000, pool: slow}
YML
}

serving_pid() { # the pid in /api/state, or nothing
  curl -fsS -m 5 "http://$ADMIN/api/state" 2>/dev/null | grep -o '"pid":[0-9]*' | head -1 | cut -d: -f2 || true
}

wait_pid_change() { # wait_pid_change OLD: until /api/state names another, ready pid (NEWPID), at most 60 s
  local old=$1 pid
  for _ in $(seq 600); do
    pid=$(serving_pid)
    if [[ -n $pid && $pid != "$old" ]] && curl -fs -m 5 -o /dev/null "http://$ADMIN/readyz"; then
      PIDS+=("$pid"); NEWPID=$pid; return 0
    fi
    sleep 0.1
  done
  log "no new pollbal after pid $old"; return 1
}

wait_ready() {
  for _ in $(seq 300); do
    curl -fs -m 5 -o /dev/null "http://$ADMIN/readyz" && return 0
    sleep 0.1
  done
  log "pollbal not ready: $(tail -5 "$RUN/pollbal.log")"; return 1
}

start_wrk() { # start_wrk SECONDS: wrk in the background, its output in $RUN/wrk.out
  wrk -t"$THREADS" -c"$CONNS" -d"$1s" --timeout 5s -s "$RUN/mix.lua" "http://$LISTEN/" >"$RUN/wrk.out" 2>&1 &
  WRK=$!
}

report() { # report PHASE: one line from wrk's summary; returns 1 when something was lost
  local phase=$1 out requests errors non2xx
  out=$(cat "$RUN/wrk.out")
  requests=$(grep -oE '^ +[0-9]+ requests in' <<<"$out" | grep -oE '[0-9]+' || echo 0)
  errors=$(grep -oE 'Socket errors: .*' <<<"$out" || echo 'Socket errors: none')
  non2xx=$(grep -oE 'Non-2xx or 3xx responses: [0-9]+' <<<"$out" | grep -oE '[0-9]+$' || echo 0)
  if [[ $errors == 'Socket errors: none' && $non2xx == 0 ]]; then
    printf '%-16s %9s requests  %s  non-2xx: %s  -> lost nothing\n' "$phase" "$requests" "$errors" "$non2xx"
    return 0
  fi
  printf '%-16s %9s requests  %s  non-2xx: %s  -> LOST REQUESTS\n' "$phase" "$requests" "$errors" "$non2xx"
  return 1
}

# cycle SIGNAL COUNT LABEL [HOLDER]: under wrk's load, COUNT times sends SIGNAL to HOLDER (the
# serving pollbal when none is given) and waits until another pollbal serves; sets PID to it.
cycle() {
  local sig=$1 n=$2 label=$3 holder=${4:-} i
  PID=$(serving_pid)
  start_wrk $(((n + 2) * (GAP + 1)))
  sleep "$GAP"
  for i in $(seq "$n"); do
    kill "-$sig" "${holder:-$PID}"
    wait_pid_change "$PID"
    PID=$NEWPID
    log "$label $i: pid $PID"
    sleep "$GAP"
  done
  wait "$WRK" || true
}

phase_upgrade() {
  mkdir -p "$RUN/state-upgrade"
  config "$RUN/state-upgrade" >"$RUN/pollbal.yaml"
  "$POLLBAL_BIN" run -config "$RUN/pollbal.yaml" >"$RUN/pollbal.log" 2>&1 & PIDS+=($!)
  wait_ready
  cycle USR2 "$UPGRADES" upgrade
  kill -TERM "$PID"
  for _ in $(seq 300); do alive "$PID" || break; sleep 0.1; done
}

phase_restart() { # phase_restart NAME STATE_DIR
  local name=$1 dir=$2 holder
  [[ -z $dir ]] || mkdir -p "$dir"
  config "$dir" >"$RUN/pollbal.yaml"
  "$SOCKETHOLD_BIN" -listen "proxy=$LISTEN" -listen "admin=$ADMIN" -- "$POLLBAL_BIN" run -config "$RUN/pollbal.yaml" \
    >"$RUN/sockethold-$name.out" 2>"$RUN/pollbal-$name.log" & holder=$!
  PIDS+=("$holder")
  wait_ready
  # A first state to restore (a round is written at most once a second).
  sleep 1.5
  cycle HUP "$RESTARTS" "$name" "$holder"
  kill -TERM "$holder"
  wait "$holder" || true
}

lost=0
for phase in $PHASES; do
  log "phase $phase"
  case $phase in
  upgrade) phase_upgrade; report upgrade || lost=1 ;;
  restart) phase_restart restart "$RUN/state-restart"; report restart || lost=1 ;;
  restart-nostate) phase_restart restart-nostate ""; report restart-nostate || true ;;
  esac
done
exit "$lost"
