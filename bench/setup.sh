#!/usr/bin/env bash
# setup.sh - install what bench/run.sh needs, from Debian packages and the Go
# module proxy only (the module's own dependencies: the harness adds none),
# then print the versions. Idempotent; needs root for the packages.
#
# The Debian packages for haproxy/nginx/caddy would normally start a system
# service on install (nginx on 0.0.0.0:80, caddy on :80). To prevent that, a
# policy-rc.d that denies service starts is put in place for the install if
# the machine has none, and removed afterwards.
#   WITH_HYPERFINE=1  also install hyperfine (not used by run.sh)
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
export PATH=/usr/local/go/bin:$PATH DEBIAN_FRONTEND=noninteractive

PKGS=(haproxy nginx caddy wrk curl iproute2 procps)
[ "${WITH_HYPERFINE:-0}" = 1 ] && PKGS+=(hyperfine)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && added_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

(cd "$REPO_DIR" && go mod download)

echo "installed versions:"
for p in haproxy nginx caddy wrk hyperfine; do
  printf '  %-10s %s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo '-')"
done
printf '  %-10s %s\n' go "$(go version | awk '{print $3}')"
printf '  %-10s %s\n' fasthttp "$(awk '{for(i=1;i<NF;i++) if($i=="github.com/valyala/fasthttp") print $(i+1)}' "$REPO_DIR/go.mod")"
