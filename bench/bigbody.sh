#!/usr/bin/env bash
# bigbody.sh - large-response throughput: pollbal vs NGINX in front of the same static backend,
# interleaved rounds, 127.0.0.1 only. Prints MiB/s per run, the means and pollbal/nginx.
#   POLLBAL_BIN (default: build ./cmd/pollbal)  SIZE_MIB [60]  CONNS [4]  DURATION [5]  ROUNDS [3]
set -Eeuo pipefail
SIZE_MIB=${SIZE_MIB:-60}; CONNS=${CONNS:-4}; DURATION=${DURATION:-5}; ROUNDS=${ROUNDS:-3}
BACKEND=127.0.0.1:18181; NGINX=127.0.0.1:18182; POLLBAL=127.0.0.1:18183; ADMIN=127.0.0.1:18184
dir=$(mktemp -d /tmp/bigbody.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; [[ ${KEEP:-0} = 1 ]] || rm -rf "$dir"; }
trap cleanup EXIT
bin=${POLLBAL_BIN:-}
if [[ -z $bin ]]; then go build -o "$dir/pollbal" ./cmd/pollbal; bin=$dir/pollbal; fi
chmod 755 "$dir"; mkdir -p "$dir/www" "$dir/logs"
head -c $((SIZE_MIB * 1024 * 1024)) /dev/zero >"$dir/www/big"
printf 'web serving v1\n' >"$dir/www/pool"
cat >"$dir/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/logs; proxy_temp_path $dir/logs; fastcgi_temp_path $dir/logs;
  uwsgi_temp_path $dir/logs; scgi_temp_path $dir/logs;
  sendfile on;
  server { listen $BACKEND; root $dir/www; default_type application/octet-stream; }
  upstream be { server $BACKEND; keepalive 64; }
  server {
    listen $NGINX;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGX
nginx -c "$dir/nginx.conf" -p "$dir" & pids+=($!)
cat >"$dir/pollbal.yaml" <<YML
site: bench
listen: $POLLBAL
admin:
  listen: $ADMIN
services:
  web:
    warning_threshold: 0
apps:
  - name: bench
    hosts: ["*"]
    service: web
backends:
  - id: b1
    address: $BACKEND
    capacity: 4096
YML
"$bin" run -config "$dir/pollbal.yaml" >"$dir/logs/pollbal.log" 2>&1 & pids+=($!)
for t in $(seq 1 150); do
  curl -fs -o /dev/null "http://$POLLBAL/pool" && curl -fs -o /dev/null "http://$NGINX/pool" && break
  sleep 0.1
done
mibs() { # url -> MiB/s over DURATION with CONNS parallel curl loops
  local url=$1 end=$((SECONDS + DURATION)) n
  rm -f "$dir/bytes"
  for _ in $(seq 1 "$CONNS"); do
    ( total=0; start=$(date +%s.%N)
      while (( SECONDS < end )); do b=$(curl -fs -o /dev/null -w '%{size_download}' "$url") || b=0; total=$((total + b)); done
      echo "$total $start $(date +%s.%N)" >>"$dir/bytes" ) &
  done
  wait
  awk '{b+=$1; if(min==""||$2<min)min=$2; if($3>max)max=$3} END {printf "%.0f", b/1048576/(max-min)}' "$dir/bytes"
}
declare -A sum
printf '%-6s %-8s %10s\n' round target MiB/s
for r in $(seq 1 "$ROUNDS"); do
  for t in nginx pollbal; do
    if [[ $t == nginx ]]; then u=http://$NGINX/big; else u=http://$POLLBAL/big; fi
    v=$(mibs "$u"); sum[$t]=$(( ${sum[$t]:-0} + v ))
    printf '%-6s %-8s %10s\n' "$r" "$t" "$v"
  done
done
n=${sum[nginx]}; p=${sum[pollbal]}
printf 'mean   nginx %d MiB/s, pollbal %d MiB/s, pollbal/nginx %s\n' $((n / ROUNDS)) $((p / ROUNDS)) "$(awk -v a="$p" -v b="$n" 'BEGIN{printf "%.2f", a/b}')"
