# shellcheck shell=bash disable=SC2034 # the variables set here are read by the callers
# lib.sh - what bench/run.sh (saturation, wrk) and bench/rate.sh (constant rate,
# vegeta) share: the command line and the knobs' common defaults, the targets and
# their addresses, the temporary directory, the backends and proxies started and
# ended by PID, the sanity check, CPU accounting from /proc and the results file.
# Sourced, never run. The caller sets, before bench_targets:
#   BENCH_SCRIPT (name in messages), BENCH_DIR, REPO_DIR, ORIG_PWD, TLS,
#   TARGETS, BASE_PORT, PIN, KEEP, READY_TIMEOUT, PROXY_CMD, PROXY_ADDR, PROXY_NAME
# and may set PROXY2_CMD, PROXY2_ADDR, PROXY2_NAME: a second extra target, started like the
# first (default address BASE_PORT+18), e.g. the same proxy with another setting side by side.
# Every process it starts is ended by PID (and its descendants by PID) on exit,
# Ctrl-C or error: servers go into PIDS, short-lived clients into TRANSIENT.

die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# with_knobs CMD VAR... prints CMD preceded by VAR='value' for each VAR that is set: the
# command as invoked, with the knobs that were set, for the results file.
with_knobs() {
  local out=$1 v
  shift
  for v in "$@"; do
    [ -n "${!v+x}" ] && out="$v=${!v@Q} $out"
  done
  echo "$out"
}

# bench_defaults sets the knobs run.sh and rate.sh share, where the environment did not.
bench_defaults() {
  GAP=${GAP:-1}
  BASE_PORT=${BASE_PORT:-18080}
  TLS=${TLS:-0}
  URL_PATH=${URL_PATH:-/}
  PIN=${PIN:-0}
  OUT_DIR=${OUT_DIR:-$BENCH_DIR/results}
  KEEP=${KEEP:-0}
  READY_TIMEOUT=${READY_TIMEOUT:-15}
  PROXY_CMD=${PROXY_CMD:-}
  PROXY_ADDR=${PROXY_ADDR:-}
  PROXY_NAME=${PROXY_NAME:-extra}
}

# proxy_flag FLAG VALUE sets the knob of --proxy-cmd, --proxy-addr or --proxy-name.
proxy_flag() {
  case $1 in
    --proxy-cmd) PROXY_CMD=$2 ;;
    --proxy-addr) PROXY_ADDR=$2 ;;
    --proxy-name) PROXY_NAME=$2 ;;
  esac
}

bench_require() { # bench_require TOOL... : every tool must be on PATH
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || die "missing '$t' - run bench/setup.sh first"
  done
}

# bench_targets sets HOST, BE_PORTS, BACKENDS, ADDR (target -> host:port), adds the extra
# targets of PROXY_CMD and PROXY2_CMD to TARGETS, and sets TLIST (the targets, in order), SCHEME
# and CURL_TLS. nginx-log is nginx with an access log (combined, buffer=64k) to a file.
bench_targets() {
  HOST=127.0.0.1
  BE_PORTS=($((BASE_PORT + 1)) $((BASE_PORT + 2)))
  BACKENDS="$HOST:${BE_PORTS[0]},$HOST:${BE_PORTS[1]}"
  declare -gA ADDR=(
    [direct]="$HOST:${BE_PORTS[0]}"
    [haproxy]="$HOST:$((BASE_PORT + 11))"
    [nginx]="$HOST:$((BASE_PORT + 12))"
    [caddy]="$HOST:$((BASE_PORT + 13))"
    [refproxy]="$HOST:$((BASE_PORT + 14))"
    [nginx-log]="$HOST:$((BASE_PORT + 15))"
  )
  PROXY2_CMD=${PROXY2_CMD:-} PROXY2_ADDR=${PROXY2_ADDR:-} PROXY2_NAME=${PROXY2_NAME:-extra2}
  if [ -n "$PROXY_CMD" ] || [ -n "$PROXY_ADDR" ]; then
    [ -n "$PROXY_CMD" ] || die "PROXY_ADDR given without PROXY_CMD"
    PROXY_ADDR=${PROXY_ADDR:-$HOST:$((BASE_PORT + 19))}
    # shellcheck disable=SC2153 # PROXY_NAME is the caller's, like PROXY_CMD
    add_extra_target PROXY_NAME "$PROXY_NAME" "$PROXY_ADDR"
  fi
  if [ -n "$PROXY2_CMD" ] || [ -n "$PROXY2_ADDR" ]; then
    [ -n "$PROXY2_CMD" ] || die "PROXY2_ADDR given without PROXY2_CMD"
    [ -n "$PROXY_CMD" ] || die "PROXY2_CMD given without PROXY_CMD"
    PROXY2_ADDR=${PROXY2_ADDR:-$HOST:$((BASE_PORT + 18))}
    add_extra_target PROXY2_NAME "$PROXY2_NAME" "$PROXY2_ADDR"
  fi
  read -r -a TLIST <<<"$TARGETS"
  local t a
  for t in "${TLIST[@]}"; do
    [ -n "${ADDR[$t]+x}" ] || die "unknown target '$t'"
    if [ "$TLS" = 1 ] && [ "$t" != nginx ] && [ "$t" != nginx-log ] && ! is_extra "$t"; then
      die "TLS=1 supports nginx, nginx-log and the extra targets only (not $t)"
    fi
    a=${ADDR[$t]}
    [[ $a =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+$ ]] || die "target $t address '$a' is not 127.x.x.x:port - loopback only"
  done
  # How clients reach the targets: plain, or TLS with the self-signed certificate (-k).
  SCHEME=http
  CURL_TLS=()
  if [ "$TLS" = 1 ]; then
    SCHEME=https
    CURL_TLS=(-k)
  fi
}

add_extra_target() { # add_extra_target VAR NAME ADDR : an extra target, appended to TARGETS
  [[ $2 =~ ^[A-Za-z0-9._-]+$ ]] || die "$1 must be [A-Za-z0-9._-]+"
  [ -z "${ADDR[$2]+x}" ] || die "$1 '$2' clashes with a built-in or the other extra target"
  ADDR[$2]=$3
  TARGETS="$TARGETS $2"
}

is_extra() { # is_extra TARGET : one of PROXY_CMD's and PROXY2_CMD's targets
  { [ -n "$PROXY_CMD" ] && [ "$1" = "$PROXY_NAME" ]; } || { [ -n "$PROXY2_CMD" ] && [ "$1" = "$PROXY2_NAME" ]; }
}

# bench_pin sets NCPU, and with PIN=1 the taskset prefixes: the client (wrk, vegeta) on the
# last CPU, every server on the others.
bench_pin() {
  NCPU=$(nproc)
  SRV_PREFIX=() CLIENT_PREFIX=()
  if [ "$PIN" = 1 ]; then
    [ "$NCPU" -ge 2 ] || die "PIN=1 needs >= 2 CPUs"
    SRV_PREFIX=(taskset -c "0-$((NCPU - 2))")
    CLIENT_PREFIX=(taskset -c "$((NCPU - 1))")
  fi
}

# --- process bookkeeping and cleanup ------------------------------------------
# bench_init makes the temporary directory RUN and installs the cleanup traps.
bench_init() {
  RUN=$(mktemp -d /tmp/proxybench.XXXXXX)
  chmod 755 "$RUN"
  PIDS=()
  declare -gA PID_OF=() TRANSIENT=()
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

descendants() { # print all descendant PIDs of $1, depth first
  local k
  for k in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$k"
    descendants "$k"
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local all=() p
  for p in "${TRANSIENT[@]}" "${PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null || continue
    all+=("$p")
    while read -r q; do [ -n "$q" ] && all+=("$q"); done < <(descendants "$p")
  done
  if [ ${#all[@]} -gt 0 ]; then
    kill -TERM "${all[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
      local alive=0
      for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.1
    done
    for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
  fi
  wait 2>/dev/null || true
  if [ "$KEEP" = 1 ]; then log "kept $RUN"; else rm -rf "$RUN"; fi
  exit $rc
}

start_proc() { # start_proc NAME CMD...  (stdout+stderr -> $RUN/NAME.log)
  local name=$1; shift
  "${SRV_PREFIX[@]}" "$@" >"$RUN/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  PID_OF[$name]=$pid
}

port_busy() { [ -n "$(ss -Htln "sport = :${1##*:}" 2>/dev/null)" ]; }

wait_ready() { # wait_ready NAME ADDR : 200 on GET / before READY_TIMEOUT
  local name=$1 addr=$2 pid=${PID_OF[$1]}
  for _ in $(seq $((READY_TIMEOUT * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "---- $name log ----" >&2; tail -20 "$RUN/$name.log" >&2
      die "$name exited during start"
    fi
    local scheme=$SCHEME
    case $name in b1|b2) scheme=http ;; esac
    curl -fsS "${CURL_TLS[@]}" -o /dev/null --max-time 1 "$scheme://$addr/" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "---- $name log ----" >&2; tail -20 "$RUN/$name.log" >&2
  die "$name not answering on $addr after ${READY_TIMEOUT}s"
}

check_target() { # responses must be the backend's, through the proxy
  local name=$1 addr=$2 n body
  n=$(curl -fsS "${CURL_TLS[@]}" --max-time 2 "$SCHEME://$addr/" | wc -c) || n=0
  body=$(curl -fsS "${CURL_TLS[@]}" --max-time 2 "$SCHEME://$addr/pool") || body=
  [ "$n" = 1024 ] && [ "$body" = "web serving v1" ] && return 0
  log "WARNING: $name failed the sanity check (GET / = $n bytes, /pool = '$body'); skipping it"
  return 1
}

# --- build the Go programs ----------------------------------------------------
bench_build() {
  mkdir -p "$RUN/bin"
  log "building backend and refproxy ($(go version | awk '{print $3}'))"
  (cd "$REPO_DIR" && go build -trimpath -o "$RUN/bin/backend" ./bench/backend)
  (cd "$REPO_DIR" && go build -trimpath -o "$RUN/bin/refproxy" ./bench/refproxy)
}

# --- the servers --------------------------------------------------------------
write_haproxy() {
  mkdir -p "$RUN/haproxy"
  local nofile maxconn
  nofile=$(ulimit -n); [ "$nofile" = unlimited ] && nofile=1000000
  maxconn=$(( (nofile - 200) / 2 )); [ $maxconn -gt 10000 ] && maxconn=10000
  cat >"$RUN/haproxy/haproxy.cfg" <<EOF
global
    maxconn $maxconn
    # nbthread defaults to the number of CPUs ($NCPU)

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 30s
    option http-keep-alive

frontend fe
    bind ${ADDR[haproxy]}
    default_backend be

backend be
    balance leastconn
    server b1 $HOST:${BE_PORTS[0]}
    server b2 $HOST:${BE_PORTS[1]}
EOF
}

write_nginx() { # write_nginx NAME : nginx, or nginx-log with an access log, in $RUN/NAME
  local name=${1:-nginx}
  local d=$RUN/$name user="" listen="listen ${ADDR[$name]};" access_log="access_log off;"
  [ "$name" = nginx-log ] && access_log="access_log $d/access.log combined buffer=64k;"
  mkdir -p "$d/tmp"
  [ "$(id -u)" = 0 ] && user="user root;"
  if [ "$TLS" = 1 ]; then
    listen="listen ${ADDR[$name]} ssl$(nginx_http2);
        ssl_certificate $TLS_CERT;
        ssl_certificate_key $TLS_KEY;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;"
  fi
  cat >"$d/nginx.conf" <<EOF
$user
worker_processes auto;
daemon off;
master_process on;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 8192; }
http {
    $access_log
    keepalive_timeout 60s;
    keepalive_requests 1000000;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    upstream be {
        least_conn;
        server $HOST:${BE_PORTS[0]};
        server $HOST:${BE_PORTS[1]};
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        $listen
        location / {
            proxy_pass http://be;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}

# nginx_http2 prints what turns HTTP/2 on in write_nginx's TLS listen line when NGINX_HTTP2=1:
# `http2 on;` on its own line from nginx 1.25.1, the listen parameter before that.
nginx_http2() {
  [ "${NGINX_HTTP2:-0}" = 1 ] || return 0
  local v
  v=$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
  if [ "$(printf '%s\n1.25.1\n' "$v" | sort -V | head -1)" = 1.25.1 ]; then
    printf ';\n        http2 on'
  else
    printf ' http2'
  fi
}

write_caddy() {
  mkdir -p "$RUN/caddy/config" "$RUN/caddy/data"
  cat >"$RUN/caddy/Caddyfile" <<EOF
{
	admin off
	auto_https off
}

http://${ADDR[caddy]} {
	bind $HOST
	reverse_proxy $HOST:${BE_PORTS[0]} $HOST:${BE_PORTS[1]} {
		lb_policy least_conn
	}
}
EOF
}

# bench_start checks that the ports are free, starts both backends, makes the TLS certificate
# (TLS=1), starts every proxy in TLIST, and sets ACTIVE to the targets that pass the sanity check.
bench_start() {
  local p t cmd addr
  for p in "${BE_PORTS[@]}"; do port_busy "$p" && die "port $p already in use"; done
  for t in "${TLIST[@]}"; do
    [ "$t" = direct ] && continue
    port_busy "${ADDR[$t]}" && die "port of $t (${ADDR[$t]}) already in use"
  done

  start_proc b1 "$RUN/bin/backend" -addr "$HOST:${BE_PORTS[0]}" -name b1
  start_proc b2 "$RUN/bin/backend" -addr "$HOST:${BE_PORTS[1]}" -name b2
  wait_ready b1 "$HOST:${BE_PORTS[0]}"
  wait_ready b2 "$HOST:${BE_PORTS[1]}"
  PID_OF[direct]=""

  TLS_CERT="" TLS_KEY=""
  if [ "$TLS" = 1 ]; then
    TLS_CERT=$RUN/tls/cert.pem TLS_KEY=$RUN/tls/key.pem
    mkdir -p "$RUN/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -subj /CN=bench.test -addext subjectAltName=DNS:bench.test,IP:127.0.0.1 \
      -keyout "$TLS_KEY" -out "$TLS_CERT" >"$RUN/tls/openssl.log" 2>&1 || { cat "$RUN/tls/openssl.log" >&2; die "openssl could not make a certificate"; }
  fi

  for t in "${TLIST[@]}"; do
    case $t in
      direct) ;;
      haproxy)
        write_haproxy
        haproxy -c -q -f "$RUN/haproxy/haproxy.cfg" >"$RUN/haproxy.check" 2>&1 || { cat "$RUN/haproxy.check" >&2; die "haproxy config invalid"; }
        start_proc haproxy haproxy -db -f "$RUN/haproxy/haproxy.cfg" ;;
      nginx|nginx-log)
        write_nginx "$t"
        start_proc "$t" nginx -p "$RUN/$t" -e "$RUN/$t/error.log" -c "$RUN/$t/nginx.conf" ;;
      caddy)
        write_caddy
        start_proc caddy env XDG_CONFIG_HOME="$RUN/caddy/config" XDG_DATA_HOME="$RUN/caddy/data" HOME="$RUN/caddy" \
          caddy run --config "$RUN/caddy/Caddyfile" --adapter caddyfile ;;
      refproxy)
        start_proc refproxy "$RUN/bin/refproxy" -addr "${ADDR[refproxy]}" -backends "$BACKENDS" ;;
      *) # an extra target
        cmd=$PROXY_CMD addr=$PROXY_ADDR
        if [ -n "$PROXY2_CMD" ] && [ "$t" = "$PROXY2_NAME" ]; then cmd=$PROXY2_CMD addr=$PROXY2_ADDR; fi
        cmd=${cmd//\{ADDR\}/$addr}
        cmd=${cmd//\{HOST\}/${addr%:*}}
        cmd=${cmd//\{PORT\}/${addr##*:}}
        cmd=${cmd//\{BACKENDS\}/$BACKENDS}
        echo "$cmd" >"$RUN/$t.cmd"
        mkdir -p "$RUN/$t"
        start_proc "$t" env BENCH_LISTEN="$addr" BENCH_BACKENDS="$BACKENDS" BENCH_TLS_CERT="$TLS_CERT" BENCH_TLS_KEY="$TLS_KEY" BENCH_TMP="$RUN/$t" bash -c "cd \"\$1\" && $cmd" bash "$ORIG_PWD" ;;
    esac
  done

  ACTIVE=()
  for t in "${TLIST[@]}"; do
    [ "$t" = direct ] || wait_ready "$t" "${ADDR[$t]}"
    if check_target "$t" "${ADDR[$t]}"; then ACTIVE+=("$t"); fi
  done
  [ ${#ACTIVE[@]} -gt 0 ] || die "no target passed the sanity check"
}

# --- measurement helpers --------------------------------------------------------
HZ=$(getconf CLK_TCK)

cpu_ticks() { # sum of utime+stime (clock ticks) of the given PIDs and their descendants
  local total=0 p q s
  local -a f
  for p in "$@"; do
    [ -n "$p" ] || continue
    for q in "$p" $(descendants "$p"); do
      s=$(cat "/proc/$q/stat" 2>/dev/null) || continue
      s=${s##*) }
      read -r -a f <<<"$s"
      total=$((total + f[11] + f[12]))
    done
  done
  echo "$total"
}
sys_cpu() { # "busy total steal" jiffies summed over all CPUs
  awk '/^cpu /{t=0; for(i=2;i<=9;i++) t+=$i; print t-$5-$6, t, $9; exit}' /proc/stat  # user..steal; guest is inside user
}
backend_ticks() { cpu_ticks "${PID_OF[b1]}" "${PID_OF[b2]}"; }
# since W0 W1 : the seconds from EPOCHREALTIME W0 to W1
since() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
# sys_delta S0 S1 : "busy total steal" from sys_cpu S0 to S1, tab-separated
sys_delta() { awk -v a="$1" -v b="$2" 'BEGIN{split(a,x," "); split(b,y," "); printf "%d\t%d\t%d", y[1]-x[1], y[2]-x[2], y[3]-x[3]}'; }
# client_cpu TIMES : the client's user + sys seconds, from the output of `times` in its subshell
client_cpu() {
  awk 'NR==2{n=split($1 " " $2,a," "); t=0; for(i=1;i<=n;i++){split(a[i],b,"m"); sub(/s$/,"",b[2]); t+=b[1]*60+b[2]} print t}' "$1"
}
be_count() { curl -fsS --max-time 2 "http://$HOST:$1/stats" 2>/dev/null | awk '{print $2}' || echo 0; }

# --- the results file ----------------------------------------------------------------
vers() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
fasthttp_version() { awk '{for(i=1;i<NF;i++) if($i=="github.com/valyala/fasthttp") print $(i+1)}' "$REPO_DIR/go.mod"; }
# machine_line prints the header's machine description; LOAD_BEFORE is the load average taken
# before the first measured run.
machine_line() {
  echo "- machine: $NCPU CPUs ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)), $(awk -F= '$1=="PRETTY_NAME"{gsub(/"/,"",$2); print $2}' /etc/os-release 2>/dev/null), Linux $(uname -r), $(awk '/MemTotal/{printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo), load before run: $LOAD_BEFORE"
}
commit_of_caller() { (cd "$ORIG_PWD" && git describe --always --dirty 2>/dev/null) || echo "?"; }

# result_file PREFIX sets STAMP and RESULT: OUT_DIR/PREFIX-STAMP.md, or the caller's directory
# when OUT_DIR cannot be written.
result_file() {
  STAMP=$(date +%Y-%m-%d_%H%M%S)
  mkdir -p "$OUT_DIR" 2>/dev/null || true
  RESULT=$OUT_DIR/$1-$STAMP.md
  touch "$RESULT" 2>/dev/null || RESULT=$ORIG_PWD/$1-$STAMP.md
}

# result_head prints the results file's first lines: the command, the date and the machine.
result_head() {
  echo "- command: \`$INVOCATION\` (from $(commit_of_caller))"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  machine_line
}

# extra_target_lines prints a results line for each extra target.
extra_target_lines() {
  if [ -n "$PROXY_CMD" ]; then echo "- extra target '$PROXY_NAME' on $PROXY_ADDR: \`$PROXY_CMD\`"; fi
  if [ -n "$PROXY2_CMD" ]; then echo "- extra target '$PROXY2_NAME' on $PROXY2_ADDR: \`$PROXY2_CMD\`"; fi
}

# bench_done prints TABLE and where the results file went.
bench_done() {
  echo
  echo "$TABLE"
  echo
  log "results written to $RESULT"
}
