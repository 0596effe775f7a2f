#!/usr/bin/env bash
# Runs pollbal as the bench harness's extra target: writes a config for BENCH_LISTEN/BENCH_BACKENDS
# (exported by run.sh) and execs `pollbal run`. `make bench-harness` does this; by hand:
#   PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal bench/run.sh
# POLLBAL_BIN picks the binary (default: build ./cmd/pollbal of this checkout into a temp dir first).
# POLLBAL_CAPACITY (default 4096) is each backend's capacity; POLLBAL_EXTRA is appended to the proxy: block.
# With BENCH_TLS_CERT and BENCH_TLS_KEY set (run.sh TLS=1), pollbal serves TLS only on BENCH_LISTEN.
# POLLBAL_ACCESS_LOG turns the access log on: "-" (standard output), an absolute path, or a file
# name put in BENCH_TMP (the target's directory in the run, removed with it) or else next to the
# config; POLLBAL_ACCESS_LOG_FORMAT is json (default) or combined. E.g. the log off and on:
#   PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal \
#   PROXY2_CMD='POLLBAL_ACCESS_LOG=access.log bench/pollbal.sh' PROXY2_NAME=pollbal-log bench/run.sh
set -euo pipefail
listen=${BENCH_LISTEN:?run me from bench/run.sh (BENCH_LISTEN unset)}
backends=${BENCH_BACKENDS:?BENCH_BACKENDS unset}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/pollbal-bench.XXXXXX")
bin=${POLLBAL_BIN:-}
if [[ -z $bin ]]; then
  (cd "$repo" && go build -o "$dir/pollbal" ./cmd/pollbal)
  bin=$dir/pollbal
fi
port=${listen##*:}
admin="127.0.0.1:$((port + 1000))"
{
  echo "site: bench"
  if [[ -n ${BENCH_TLS_CERT:-} ]]; then
    echo 'listen: ""'
    echo "tls:"
    echo "  listen: $listen"
    echo "  certificates:"
    echo "    - cert_file: $BENCH_TLS_CERT"
    echo "      key_file: ${BENCH_TLS_KEY:?BENCH_TLS_KEY unset}"
  else
    echo "listen: $listen"
  fi
  echo "admin:"
  echo "  listen: $admin"
  echo "services:"
  echo "  web:"
  echo "    warning_threshold: 0"
  echo "apps:"
  echo "  - name: bench"
  echo '    hosts: ["*"]'
  echo "    service: web"
  echo "proxy:"
  echo "  retries: 1"
  [[ -n ${POLLBAL_EXTRA:-} ]] && printf '%s\n' "$POLLBAL_EXTRA"
  if [[ -n ${POLLBAL_ACCESS_LOG:-} ]]; then
    log=$POLLBAL_ACCESS_LOG
    [[ $log == - || $log == /* ]] || log=${BENCH_TMP:-$dir}/$log
    echo "access_log:"
    echo "  path: \"$log\""
    echo "  format: ${POLLBAL_ACCESS_LOG_FORMAT:-json}"
  fi
  echo "backends:"
  i=0
  IFS=, read -ra list <<<"$backends"
  for b in "${list[@]}"; do
    i=$((i + 1))
    echo "  - id: b$i"
    echo "    address: $b"
    echo "    capacity: ${POLLBAL_CAPACITY:-4096}"
  done
} >"$dir/pollbal.yaml"
exec "$bin" run -config "$dir/pollbal.yaml"
