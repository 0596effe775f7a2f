#!/usr/bin/env bash
# Installs pollbal (make install): release/install.sh BIN DESTDIR PREFIX SYSCONFDIR, with
# BIN/pollbal and BIN/pollbal.1 built (make man). The layout, under DESTDIR:
#   PREFIX/bin/pollbal
#   PREFIX/share/man/man1/pollbal.1
#   PREFIX/share/doc/pollbal/{LICENSE,README.md,pollbal.yaml,docs/}  (pollbal.yaml: the commented reference)
#   PREFIX/lib/systemd/system/{pollbal.service,pollbal.socket,pollbal-admin.socket}
#   SYSCONFDIR/pollbal/pollbal.yaml  (the configuration the unit runs; an existing one is kept)
# The units are rewritten for PREFIX and SYSCONFDIR: ExecStart= runs PREFIX/bin/pollbal and
# Documentation= names the man page and the README installed here.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 4 ]; then
  echo "usage: release/install.sh BIN DESTDIR PREFIX SYSCONFDIR" >&2
  exit 2
fi
bin=$1 destdir=$2 prefix=$3 sysconfdir=$4
bindir=$prefix/bin
mandir=$prefix/share/man/man1
docdir=$prefix/share/doc/pollbal
unitdir=$prefix/lib/systemd/system
confdir=$sysconfdir/pollbal

install -d "$destdir$bindir" "$destdir$mandir" "$destdir$docdir/docs" "$destdir$unitdir" "$destdir$confdir"
install -m 0755 "$bin/pollbal" "$destdir$bindir/pollbal"
install -m 0644 "$bin/pollbal.1" "$destdir$mandir/pollbal.1"
install -m 0644 LICENSE README.md "$destdir$docdir/"
install -m 0644 configs/pollbal.yaml "$destdir$docdir/pollbal.yaml"
install -m 0644 docs/*.md docs/*.png "$destdir$docdir/docs/"
for unit in examples/systemd/*.service examples/systemd/*.socket; do
  sed -e "s#/usr/local/bin/pollbal#$bindir/pollbal#g" \
      -e "s#/usr/local/share/doc/pollbal#$docdir#g" \
      -e "s#/etc/pollbal/#$confdir/#g" \
      "$unit" > "$destdir$unitdir/$(basename "$unit")"
  chmod 0644 "$destdir$unitdir/$(basename "$unit")"
done
if [ -e "$destdir$confdir/pollbal.yaml" ]; then
  echo "kept the existing $destdir$confdir/pollbal.yaml (examples/systemd/pollbal.yaml is the one written for the unit)"
else
  install -m 0644 examples/systemd/pollbal.yaml "$destdir$confdir/pollbal.yaml"
fi
echo "installed pollbal under ${destdir:-/}: $bindir/pollbal, $mandir/pollbal.1, $docdir/, $unitdir/pollbal.{service,socket} and pollbal-admin.socket, $confdir/pollbal.yaml"
