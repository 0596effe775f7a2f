#!/usr/bin/env bash
# run.sh — render examples/nginx/nginx.conf.in into a prefix directory and (with "run") start
# fcgiwrap and nginx in the foreground. See --help and README.md.
set -euo pipefail

PROG=${0##*/}
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
PATH=$PATH:/usr/sbin:/sbin

usage() {
	cat <<USAGE
Usage: $PROG render|run --prefix DIR --listen 127.0.0.1:PORT [flags]

  render   write DIR/conf/nginx.conf, DIR/html/index.html and the directories nginx needs
  run      render, then run fcgiwrap and nginx in the foreground until SIGTERM/SIGINT
           (if either exits, the other is stopped and run.sh exits non-zero)

Flags:
  --prefix DIR        nginx prefix directory (required; created if missing)
  --listen ADDR       nginx listen address, host:port (required, e.g. 127.0.0.1:8081)
  --pool-file FILE    file served at GET /pool (default: DIR/pool; created empty if missing,
                      which means "in no service" — write "<service> serving <version>" to join)
  --lock-file FILE    lock touched by POST /pool_warning (default: DIR/lock)
  --cgi FILE          the /pool_warning CGI (default: scripts/pool-warning.cgi of this tree)
  --user USER         worker user when started as root (default: the current user)
  --capacity N        refuse requests past N in progress at once with 503 + X-Pool-Full
                      (default 0: no limit); set the same capacity in pollbal's configuration
  -h, --help          show this help
USAGE
}

die_usage() {
	printf '%s: %s (see --help)\n' "$PROG" "$*" >&2
	exit 2
}

log() {
	printf '%s %s[%d]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$PROG" "$$" "$*" >&2
}

abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$(pwd)" "$1" ;;
	esac
}

# sed_escape makes $1 safe as a sed replacement with | as the delimiter.
sed_escape() {
	printf '%s' "$1" | sed -e 's/[\\|&]/\\&/g'
}

(($# > 0)) || {
	usage >&2
	exit 2
}
mode=$1
shift
case $mode in
-h | --help)
	usage
	exit 0
	;;
render | run) ;;
*) die_usage "unknown command: $mode" ;;
esac

prefix=''
listen=''
pool_file=''
lock_file=''
cgi=$(cd -- "$HERE/../../scripts" && pwd)/pool-warning.cgi
user=$(id -un)
capacity=0
while (($# > 0)); do
	case $1 in
	-h | --help)
		usage
		exit 0
		;;
	--prefix | --listen | --pool-file | --lock-file | --cgi | --user | --capacity)
		(($# > 1)) || die_usage "$1 needs a value"
		case $1 in
		--prefix) prefix=$2 ;;
		--listen) listen=$2 ;;
		--pool-file) pool_file=$2 ;;
		--lock-file) lock_file=$2 ;;
		--cgi) cgi=$2 ;;
		--user) user=$2 ;;
		--capacity) capacity=$2 ;;
		esac
		shift 2
		;;
	*) die_usage "unknown argument: $1" ;;
	esac
done
[[ -n $prefix ]] || die_usage "--prefix is required"
[[ $listen =~ ^[^[:space:]\;]+:[0-9]+$ ]] || die_usage "--listen must be host:port"
[[ $capacity =~ ^[0-9]{1,9}$ ]] || die_usage "--capacity must be a number"

prefix=$(abspath "$prefix")
pool_file=$(abspath "${pool_file:-$prefix/pool}")
lock_file=$(abspath "${lock_file:-$prefix/lock}")
cgi=$(abspath "$cgi")
[[ -x $cgi ]] || die_usage "CGI $cgi is not executable"
socket=$prefix/run/fcgiwrap.sock
for p in "$prefix" "$pool_file" "$lock_file" "$cgi"; do
	[[ $p != *[\"\;[:space:]]* ]] || die_usage "path must not contain quotes, semicolons or spaces: $p"
done

limit_line="# no --capacity: requests are not limited"
if ((10#$capacity > 0)); then
	limit_line="limit_conn inprogress $((10#$capacity)); limit_conn_status 503; error_page 503 @full;"
fi

user_line=
if ((EUID == 0)); then
	user_line="user $user;"
fi

mkdir -p "$prefix"/{conf,html,logs,run,tmp} "$(dirname -- "$pool_file")" "$(dirname -- "$lock_file")"
[[ -e $pool_file ]] || : >"$pool_file"
[[ -e $prefix/html/index.html ]] || printf '<!doctype html>\n<title>pollbal example backend</title>\n<p>served by nginx\n' >"$prefix/html/index.html"

sed -e "s|@PREFIX@|$(sed_escape "$prefix")|g" \
	-e "s|@LISTEN@|$(sed_escape "$listen")|g" \
	-e "s|@POOL_FILE@|$(sed_escape "$pool_file")|g" \
	-e "s|@LOCK_FILE@|$(sed_escape "$lock_file")|g" \
	-e "s|@CGI@|$(sed_escape "$cgi")|g" \
	-e "s|@FCGI_SOCKET@|$(sed_escape "$socket")|g" \
	-e "s|@USER_LINE@|$(sed_escape "$user_line")|g" \
	-e "s|@LIMIT_CONN@|$(sed_escape "$limit_line")|g" \
	"$HERE/nginx.conf.in" >"$prefix/conf/nginx.conf.tmp"
mv -f "$prefix/conf/nginx.conf.tmp" "$prefix/conf/nginx.conf"
log "rendered $prefix/conf/nginx.conf (listen $listen, pool file $pool_file, lock file $lock_file)"

[[ $mode == run ]] || exit 0

command -v nginx >/dev/null || {
	echo "$PROG: nginx not found" >&2
	exit 1
}
command -v fcgiwrap >/dev/null || {
	echo "$PROG: fcgiwrap not found" >&2
	exit 1
}
nginx -t -q -e "$prefix/logs/error.log" -p "$prefix" -c "$prefix/conf/nginx.conf"

fcgi_pid=''
nginx_pid=''
stop() {
	trap - TERM INT
	[[ -z $nginx_pid ]] || kill -TERM "$nginx_pid" 2>/dev/null || true
	[[ -z $fcgi_pid ]] || kill -TERM "$fcgi_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -f -- "$socket"
}
trap 'log "stopping"; stop; exit 0' TERM INT

rm -f -- "$socket"
# -p: fcgiwrap runs nothing but the pool-warning CGI.
fcgiwrap -c 1 -p "$cgi" -s "unix:$socket" &
fcgi_pid=$!
nginx -e "$prefix/logs/error.log" -p "$prefix" -c "$prefix/conf/nginx.conf" -g 'daemon off;' &
nginx_pid=$!
log "running nginx (pid $nginx_pid) and fcgiwrap (pid $fcgi_pid); listening on $listen"

status=0
wait -n "$nginx_pid" "$fcgi_pid" || status=$?
log "nginx or fcgiwrap exited (status $status); stopping"
stop
exit 1
