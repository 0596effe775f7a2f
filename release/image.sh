#!/usr/bin/env bash
# The container image (make image, make image-test):
#   release/image.sh build ENGINE IMAGE VERSION COMMIT
#   release/image.sh test ENGINE IMAGE VERSION COMMIT BIN
# build: a static binary for this machine's architecture and release/Containerfile, tagged
# IMAGE:VERSION and IMAGE:latest. test: builds it, then runs it with a configuration mounted at
# /etc/pollbal/pollbal.yaml on the host's network (127.0.0.1 ports) in front of BIN's example
# backend, and checks /healthz, /readyz, a proxied request, the user it runs as and
# `pollbal version`. Where no engine is installed, or it can build but not run containers (a
# sandbox without the cgroups it needs), it says exactly what failed; in the second case it
# runs the image's own files, entrypoint, command and user with chroot instead, as root.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

if [ $# -lt 5 ]; then
  echo "usage: release/image.sh build|test ENGINE IMAGE VERSION COMMIT [BIN]" >&2
  exit 2
fi
action=$1 engine=$2 image=$3 version=$4 commit=$5 bin=${6:-bin}
tag=$image:$version

if [ -z "$engine" ]; then
  echo "SKIP: no container engine: neither podman nor docker is installed (ENGINE=...)"
  [ "$action" = test ] && exit 0
  exit 1
fi

build() {
  local ctx
  ctx=$(mktemp -d)
  mkdir "$ctx/state"
  CGO_ENABLED=0 GOOS=linux GOARCH="$("$GO" env GOARCH)" "$GO" build -trimpath \
    -ldflags "-s -w -X main.version=$version -X main.commit=$commit" -o "$ctx/pollbal" ./cmd/pollbal
  cp release/Containerfile "$ctx/Containerfile"
  "$engine" build --quiet --build-arg "VERSION=$version" -f "$ctx/Containerfile" -t "$tag" -t "$image:latest" "$ctx"
  rm -rf "$ctx"
  echo "built $tag ($engine)"
}

if [ "$action" = build ]; then
  build
  exit 0
fi
[ "$action" = test ] || { echo "release/image.sh: unknown action $action" >&2; exit 2; }

if ! out=$("$engine" info 2>&1); then
  echo "SKIP: $engine does not work here: $(echo "$out" | tail -1)"
  exit 0
fi
build

work=$(mktemp -d)
name=pollbal-image-test-$$
pids=()
cleanup() {
  "$engine" rm -f "$name" >/dev/null 2>&1 || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }
# free_port prints a port of 127.0.0.1 that nothing listens on now.
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  fail "no free port on 127.0.0.1"
}
# wait_for URL: until it answers 2xx, for at most 15 s.
wait_for() {
  for _ in $(seq 75); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  return 1
}

# An example backend on the host, and a configuration in front of it on 127.0.0.1.
printf 'web serving v1\n' > "$work/pool"
"$bin/example-backend" -listen 127.0.0.1:0 -id web-1 -pool-file "$work/pool" >"$work/backend.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q '^listening ' "$work/backend.log" && break; sleep 0.1; done
backend=$(sed -n 's/^listening //p' "$work/backend.log")
[ -n "$backend" ] || fail "the example backend did not start: $(cat "$work/backend.log")"
listen=127.0.0.1:$(free_port) admin=127.0.0.1:$(free_port)
cat > "$work/pollbal.yaml" <<YAML
site: image-test
listen: $listen
admin: {listen: $admin}
services: {web: {}}
apps: [{name: www, hosts: ["*"]}]
backends: [{id: web-1, address: $backend}]
YAML
chmod 0644 "$work/pollbal.yaml"

mode=container
if ! out=$("$engine" run -d --name "$name" --network host \
    -v "$work/pollbal.yaml:/etc/pollbal/pollbal.yaml:ro" "$tag" 2>&1); then
  echo "NOTE: $engine built $tag but cannot run a container here: $(echo "$out" | tail -1)"
  if [ "$(id -u)" != 0 ] || ! command -v chroot >/dev/null; then
    echo "SKIP: running the image needs a working $engine, or root and chroot for the fallback"
    exit 0
  fi
  echo "FALLBACK: running the image's own files, entrypoint, command and user with chroot (no container engine)"
  mode=chroot
  "$engine" rm -f "$name" >/dev/null 2>&1 || true
  "$engine" create --name "$name" "$tag" >/dev/null
  mkdir "$work/root"
  "$engine" export "$name" | tar -x -C "$work/root"
  # What the volume mount would do: the configuration at /etc/pollbal/pollbal.yaml.
  mkdir -p "$work/root/etc/pollbal"
  cp "$work/pollbal.yaml" "$work/root/etc/pollbal/pollbal.yaml"
  user=$("$engine" image inspect --format '{{.Config.User}}' "$tag")
  mapfile -t argv < <("$engine" image inspect --format '{{range .Config.Entrypoint}}{{println .}}{{end}}{{range .Config.Cmd}}{{println .}}{{end}}' "$tag" | sed '/^$/d')
  chroot --userspec="$user" "$work/root" "${argv[@]}" >"$work/pollbal.log" 2>&1 &
  pids+=($!)
  pollbal_pid=$!
fi

# pollbal_log prints the last lines pollbal logged.
pollbal_log() {
  if [ $mode = container ]; then "$engine" logs "$name" 2>&1 | tail -5; else tail -5 "$work/pollbal.log"; fi
}
wait_for "http://$admin/healthz" || fail "/healthz did not answer: $(pollbal_log)"
echo "ok: /healthz answers on $admin"
wait_for "http://$admin/readyz" || fail "/readyz did not answer 200: $(pollbal_log)"
served=$(curl -s -D - -o /dev/null "http://$listen/" | tr -d '\r' | sed -n 's/^X-Pollbal-Backend: //Ip')
[ "$served" = web-1 ] || fail "a request through $listen was not served by web-1 (X-Pollbal-Backend: '$served')"
echo "ok: a request through $listen is served by web-1"

if [ $mode = container ]; then
  pollbal_pid=$("$engine" inspect --format '{{.State.Pid}}' "$name")
  got_version=$("$engine" run --rm "$tag" version)
else
  got_version=$(chroot --userspec="$user" "$work/root" "${argv[0]}" version)
fi
uid=$(ps -o uid= -p "$pollbal_pid" | tr -d ' ')
[ "$uid" = 65532 ] || fail "pollbal runs as uid '$uid', want 65532"
echo "ok: pollbal runs as uid 65532"
case $got_version in
  "pollbal $version (commit $commit, go"*) echo "ok: $got_version" ;;
  *) fail "pollbal version printed '$got_version', want pollbal $version (commit $commit, go...)" ;;
esac
echo "PASS: image $tag ($mode)"
