#!/usr/bin/env bash
# Builds pollbal's release archives (make release):
#   release/release.sh VERSION COMMIT DIST PLATFORM...
# For each PLATFORM (linux/amd64, linux/arm64): a static binary (CGO_ENABLED=0, -trimpath)
# stamped with VERSION and COMMIT, packed with its man page, LICENSE, README.md, the docs,
# configs/pollbal.yaml and the systemd units as DIST/pollbal-VERSION-linux-ARCH.tar.gz; then
# DIST/SHA256SUMS. The archives are reproducible: same sources, same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

if [ $# -lt 4 ]; then
  echo "usage: release/release.sh VERSION COMMIT DIST PLATFORM..." >&2
  exit 2
fi
version=$1 commit=$2 dist=$3
shift 3
case $version in
  v[0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "release: VERSION=$version is not a release version such as v0.9.0 (make release VERSION=v0.9.0)" >&2; exit 2 ;;
esac
for platform in "$@"; do
  case $platform in
    linux/amd64 | linux/arm64) ;;
    *) echo "release: platform $platform: want linux/amd64 or linux/arm64" >&2; exit 2 ;;
  esac
done

# File times in the archives are the commit's, so that they do not depend on when it was built.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
ldflags="-s -w -X main.version=$version -X main.commit=$commit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() { # GOOS GOARCH OUTPUT
  CGO_ENABLED=0 GOOS=$1 GOARCH=$2 "$GO" build -trimpath -ldflags "$ldflags" -o "$3" ./cmd/pollbal
}

# The man page comes from the binary itself (pollbal help -man): one built for this machine.
build "$("$GO" env GOOS)" "$("$GO" env GOARCH)" "$work/pollbal-here"
"$work/pollbal-here" help -man > "$work/pollbal.1"

rm -rf "$dist"
mkdir -p "$dist"
for platform in "$@"; do
  os=${platform%/*} arch=${platform#*/}
  name=pollbal-$version-$os-$arch
  stage=$work/$name
  mkdir -p "$stage/systemd" "$stage/docs"
  build "$os" "$arch" "$stage/pollbal"
  cp "$work/pollbal.1" LICENSE README.md "$stage/"
  cp configs/pollbal.yaml "$stage/pollbal.yaml"
  cp examples/systemd/*.service examples/systemd/*.socket examples/systemd/pollbal.yaml "$stage/systemd/"
  cp docs/*.md docs/*.png "$stage/docs/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode='u+rwX,go+rX,go-w' \
    -C "$work" -cf - "$name" | gzip -n > "$dist/$name.tar.gz"
  echo "$dist/$name.tar.gz"
done
(cd "$dist" && sha256sum pollbal-*.tar.gz > SHA256SUMS)
echo "$dist/SHA256SUMS"
