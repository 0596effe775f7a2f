#!/usr/bin/env bash
# pollbal-update.sh — the backend side of pollbal's rolling-update protection (docs/protocol.md).
# Run `pollbal-update.sh --help` for the loop it implements and its parameters.
set -euo pipefail

PROG=${0##*/}

usage() {
	cat <<EOF
Usage: $PROG [flags]

Rolling-update loop for one backend behind pollbal (docs/protocol.md). Each round:
  1. sleep a random time in [0, jitter];
  2. if the lock file was touched within lock-window, start over;
  3. write "<service> leaving <version>" to the pool file; sleep announce-wait;
  4. if the lock file was touched within lock-window, write "<service> serving <version>"
     back and start over;
  5. else empty the pool file (out of rotation), sleep drain-wait, run the update command,
     and write "<service> serving <new-version>".
pollbal touches the lock file (through POST /pool_warning) while this backend is needed.
The pool file is always replaced atomically (temp file + mv).

Flags (each also read from the environment variable shown; a flag wins):
  --pool-file PATH       POLLBAL_POOL_FILE      file served at GET /pool (required)
  --lock-file PATH       POLLBAL_LOCK_FILE      file touched by POST /pool_warning (required)
  --service NAME         POLLBAL_SERVICE        service name in the pool file (required)
  --version V            POLLBAL_VERSION        current version ("" = unversioned)
  --new-version V        POLLBAL_NEW_VERSION    version after the update (default: --version)
  --update-cmd CMD       POLLBAL_UPDATE_CMD     shell command that performs the update (default: true);
                                                run with bash -c, with POLLBAL_SERVICE,
                                                POLLBAL_VERSION, POLLBAL_NEW_VERSION and
                                                POLLBAL_POOL_FILE in its environment
  --jitter SECONDS       POLLBAL_JITTER         max random sleep before each attempt (default: 30)
  --lock-window SECONDS  POLLBAL_LOCK_WINDOW    a lock touched this recently blocks leaving (default: 10)
  --announce-wait SECS   POLLBAL_ANNOUNCE_WAIT  time between announcing leaving and going down (default: 10)
  --drain-wait SECONDS   POLLBAL_DRAIN_WAIT     time out of rotation before the update (default: 5)
  --rounds N             POLLBAL_ROUNDS         successful updates before exiting; 0 = forever (default: 1)
  -h, --help                                    show this help

Seconds may be fractional (0.5). Flags accept "--flag value" and "--flag=value".
Steps are logged with a timestamp to stderr.

SIGTERM/SIGINT: if leaving was announced or the pool file emptied and the update has not
started, "<service> serving <version>" is written back; during the update command the script
lets it finish (the command ignores SIGTERM, SIGINT and SIGHUP, also when they are sent to the
whole process group), writes the resulting state, then exits. Exit status: 0 when done or
stopped by a signal, 1 when the update command failed (the old version is written back
as serving), 2 on bad usage.
EOF
}

log() {
	printf '%s %s[%d]: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)" "$PROG" "$$" "$*" >&2
}

die_usage() {
	printf '%s: %s (see --help)\n' "$PROG" "$*" >&2
	exit 2
}

POOL_FILE=${POLLBAL_POOL_FILE:-}
LOCK_FILE=${POLLBAL_LOCK_FILE:-}
SERVICE=${POLLBAL_SERVICE:-}
VERSION=${POLLBAL_VERSION:-}
NEW_VERSION=${POLLBAL_NEW_VERSION:-}
UPDATE_CMD=${POLLBAL_UPDATE_CMD:-true}
JITTER=${POLLBAL_JITTER:-30}
LOCK_WINDOW=${POLLBAL_LOCK_WINDOW:-10}
ANNOUNCE_WAIT=${POLLBAL_ANNOUNCE_WAIT:-10}
DRAIN_WAIT=${POLLBAL_DRAIN_WAIT:-5}
ROUNDS=${POLLBAL_ROUNDS:-1}
new_version_set=${POLLBAL_NEW_VERSION+yes}

while (($# > 0)); do
	arg=$1
	shift
	case $arg in
	-h | --help)
		usage
		exit 0
		;;
	--*=*)
		name=${arg%%=*}
		value=${arg#*=}
		;;
	--*)
		name=$arg
		(($# > 0)) || die_usage "$name needs a value"
		value=$1
		shift
		;;
	*) die_usage "unexpected argument: $arg" ;;
	esac
	case $name in
	--pool-file) POOL_FILE=$value ;;
	--lock-file) LOCK_FILE=$value ;;
	--service) SERVICE=$value ;;
	--version) VERSION=$value ;;
	--new-version)
		NEW_VERSION=$value
		new_version_set=yes
		;;
	--update-cmd) UPDATE_CMD=$value ;;
	--jitter) JITTER=$value ;;
	--lock-window) LOCK_WINDOW=$value ;;
	--announce-wait) ANNOUNCE_WAIT=$value ;;
	--drain-wait) DRAIN_WAIT=$value ;;
	--rounds) ROUNDS=$value ;;
	*) die_usage "unknown flag: $name" ;;
	esac
done

[[ -n $new_version_set ]] || NEW_VERSION=$VERSION
[[ -n $POOL_FILE ]] || die_usage "--pool-file is required"
[[ -n $LOCK_FILE ]] || die_usage "--lock-file is required"
[[ -n $SERVICE ]] || die_usage "--service is required"
[[ $SERVICE =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$ ]] || die_usage "invalid --service: $SERVICE"
for v in "$VERSION" "$NEW_VERSION"; do
	[[ -z $v || $v =~ ^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$ ]] || die_usage "invalid version: $v"
done
for pair in "jitter=$JITTER" "lock-window=$LOCK_WINDOW" "announce-wait=$ANNOUNCE_WAIT" "drain-wait=$DRAIN_WAIT"; do
	[[ ${pair#*=} =~ ^[0-9]+(\.[0-9]+)?$ ]] || die_usage "--${pair%%=*} must be a number of seconds, got '${pair#*=}'"
done
[[ $ROUNDS =~ ^[0-9]+$ ]] || die_usage "--rounds must be a non-negative integer, got '$ROUNDS'"

# phase: idle (pool file says serving), announced (leaving written), drained (pool file
# empty), updating (update command running). The signal handler acts on it.
phase=idle
stop_requested=0
sleep_pid=

# line STATUS VERSION prints one /pool line (no newline); an unversioned service omits the
# version.
line() {
	if [[ -n $2 ]]; then
		printf '%s %s %s' "$SERVICE" "$1" "$2"
	else
		printf '%s %s' "$SERVICE" "$1"
	fi
}

# write_pool LINE replaces the pool file atomically (temp file in the same directory, then
# mv) with LINE and a newline, or with nothing when LINE is empty.
write_pool() {
	local dir tmp
	dir=$(dirname -- "$POOL_FILE")
	tmp=$(mktemp "$dir/.${POOL_FILE##*/}.XXXXXX")
	if [[ -n $1 ]]; then
		printf '%s\n' "$1" >"$tmp"
	else
		: >"$tmp"
	fi
	chmod 0644 "$tmp"
	mv -f -- "$tmp" "$POOL_FILE"
}

# nap SECONDS sleeps in the background so that a signal is handled at once.
nap() {
	sleep "$1" &
	sleep_pid=$!
	wait "$sleep_pid" || true
	sleep_pid=
}

# lock_age prints the seconds since the lock file was touched (fractional), or nothing
# when it does not exist.
lock_age() {
	local mtime now
	mtime=$(stat -c %.9Y -- "$LOCK_FILE" 2>/dev/null) || return 0
	now=$(date +%s.%N)
	awk -v n="$now" -v m="$mtime" 'BEGIN { printf "%.3f\n", n - m }'
}

# lock_fresh succeeds when the lock file was touched within the lock window.
lock_fresh() {
	local age
	age=$(lock_age)
	[[ -n $age ]] || return 1
	if awk -v a="$age" -v w="$LOCK_WINDOW" 'BEGIN { exit !(a < w) }'; then
		log "lock touched ${age}s ago (window ${LOCK_WINDOW}s)"
		return 0
	fi
	return 1
}

random_delay() {
	awk -v j="$JITTER" -v r="$RANDOM" 'BEGIN { printf "%.3f\n", j * r / 32767 }'
}

on_signal() {
	local sig=$1 pids
	# Every background sleep, also one started a moment before its pid was recorded (the
	# signal can land between `sleep &` and `sleep_pid=$!`): an orphaned sleep would keep the
	# script's output open for its whole duration.
	pids=$(jobs -p)
	if [[ -n $sleep_pid ]]; then
		pids+=" $sleep_pid"
	fi
	if [[ -n ${pids// /} ]]; then
		# shellcheck disable=SC2086 # a list of pids
		kill $pids 2>/dev/null || true
	fi
	case $phase in
	announced | drained)
		write_pool "$(line serving "$VERSION")"
		log "got SIG$sig while $phase: wrote '$(line serving "$VERSION")' back; exiting"
		exit 0
		;;
	updating)
		# Never abandon a half-done update: finish it, record its result, then exit.
		log "got SIG$sig during the update; exiting after it finishes"
		stop_requested=1
		;;
	*)
		log "got SIG$sig; exiting"
		exit 0
		;;
	esac
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

log "starting: service=$SERVICE version=${VERSION:--} new-version=${NEW_VERSION:--} pool-file=$POOL_FILE lock-file=$LOCK_FILE jitter=$JITTER lock-window=$LOCK_WINDOW announce-wait=$ANNOUNCE_WAIT drain-wait=$DRAIN_WAIT rounds=$ROUNDS"

done_rounds=0
retry=0
while :; do
	delay=$(random_delay)
	# After a start-over, never spin: with jitter 0 the lock would be re-read in a tight loop.
	if ((retry)) && awk -v d="$delay" 'BEGIN { exit !(d < 0.05) }'; then
		delay=0.05
	fi
	log "sleeping ${delay}s"
	nap "$delay"
	retry=1

	if lock_fresh; then
		log "pool warning active; starting over"
		continue
	fi

	# The phase changes before the file does, so a signal in between still restores serving.
	phase=announced
	write_pool "$(line leaving "$VERSION")"
	log "announced '$(line leaving "$VERSION")'; waiting ${ANNOUNCE_WAIT}s"
	nap "$ANNOUNCE_WAIT"

	if lock_fresh; then
		write_pool "$(line serving "$VERSION")"
		phase=idle
		log "pool warning during announce; wrote '$(line serving "$VERSION")' back; starting over"
		continue
	fi

	phase=drained
	write_pool ""
	log "emptied pool file (out of rotation); draining ${DRAIN_WAIT}s"
	nap "$DRAIN_WAIT"

	phase=updating
	log "running update command: $UPDATE_CMD"
	status=0
	# The command ignores SIGTERM/SIGINT/SIGHUP (inherited through exec), so a signal to the
	# whole process group (Ctrl-C, timeout(1), systemd) cannot cut an update in half; the
	# script's own trap records the signal and exits once the update is done.
	(
		trap '' TERM INT HUP
		POLLBAL_SERVICE=$SERVICE POLLBAL_VERSION=$VERSION POLLBAL_NEW_VERSION=$NEW_VERSION \
			POLLBAL_POOL_FILE=$POOL_FILE exec bash -c "$UPDATE_CMD"
	) || status=$?
	if ((status != 0)); then
		write_pool "$(line serving "$VERSION")"
		phase=idle
		log "update command failed with status $status; wrote '$(line serving "$VERSION")' back"
		exit 1
	fi

	VERSION=$NEW_VERSION
	write_pool "$(line serving "$VERSION")"
	phase=idle
	done_rounds=$((done_rounds + 1))
	retry=0
	log "updated; wrote '$(line serving "$VERSION")' (round $done_rounds)"

	if ((stop_requested)); then
		log "exiting on signal"
		exit 0
	fi
	if ((ROUNDS > 0 && done_rounds >= ROUNDS)); then
		log "done after $done_rounds round(s)"
		exit 0
	fi
done
