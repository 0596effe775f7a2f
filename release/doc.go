// Package release holds how pollbal is packaged: release.sh (make release: static binaries
// and tarballs with the man page, docs, configuration and systemd units, and SHA256SUMS),
// install.sh (make install: the same files in the FHS places under PREFIX and DESTDIR),
// image.sh and Containerfile (make image, make image-test: a FROM scratch image that runs as
// user 65532 with the configuration mounted). It has no code: its tests lint the scripts and
// check the installed layout; cmd/pollbal's TestFreshClone builds and unpacks a release.
package release
