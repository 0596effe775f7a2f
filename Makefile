# pollbal — the two commands are `make demo` and `make test`; `make release`, `make install`
# and `make image` package it (see "Installing" in docs/operating.md).
GO      ?= go
# What a build is stamped with (pollbal version, /api/state, the User-Agent of checks): the
# latest v* tag as git describe says it (v0.9.0, or v0.9.0-3-gabc1234 after it), the commit
# where there is no tag, dev outside git; and the commit, with -dirty when the tree has changes.
# make release VERSION=v0.9.0 names a version.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell c=$$(git rev-parse --short HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; echo $$c; })
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN     ?= bin
# Extra flags for the demo program, e.g. DEMO_FLAGS="-timings fast -quiet"; DEMO_ROUNDS=N sets
# how many updates each backend makes.
DEMO_FLAGS ?=

# make release: static binaries for these platforms, packed in DIST.
PLATFORMS ?= linux/amd64 linux/arm64
DIST      ?= dist
# make install: DESTDIR/PREFIX/bin/pollbal and the rest (docs/operating.md, "Installing").
PREFIX     ?= /usr/local
DESTDIR    ?=
SYSCONFDIR ?= /etc
# make image: a FROM scratch image, built with podman or docker (the first that is installed).
IMAGE  ?= pollbal
ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

.PHONY: all build demo test vet lint h2spec bench bench-harness bench-h2 bench-accesslog bench-rate bench-bigbody bench-scale bench-upgrade clean \
	man release install image image-test

all: build

# pollbal, the example backend, and pollbal-etcd (a local etcd for docs/fleet.md's walk-through).
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/pollbal ./cmd/pollbal
	$(GO) build -o $(BIN)/example-backend ./internal/testbackend
	$(GO) build -o $(BIN)/pollbal-etcd ./cmd/pollbal-etcd

# Example backends + pollbal + a rolling update you can watch (Ctrl-C stops everything).
demo: build
	DEMO_VIA_MAKE=1 $(GO) run ./cmd/pollbal-demo -pollbal $(BIN)/pollbal -backend $(BIN)/example-backend $(DEMO_FLAGS)

# vet, then every test (unit, end-to-end with real processes, browser, scripts) under -race,
# then the allocation guards once more without -race (sync.Pool drops items under it).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'Allocs|Allocate' ./proxy/... ./balancer/ ./internal/accesslog/
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  echo "NOTE: the status-page browser test was SKIPPED: no chromium installed (apt-get install -y chromium)"
	@command -v promtool >/dev/null 2>&1 || \
	  echo "NOTE: the alerting-rules test was SKIPPED: no promtool installed (apt-get install -y prometheus)"
	@command -v systemd-analyze >/dev/null 2>&1 || \
	  echo "NOTE: the systemd unit test was SKIPPED: no systemd-analyze installed (apt-get install -y systemd)"
	@command -v shellcheck >/dev/null 2>&1 || \
	  echo "NOTE: the shellcheck tests were SKIPPED: no shellcheck installed (apt-get install -y shellcheck)"
	@command -v groff >/dev/null 2>&1 || \
	  echo "NOTE: the man page was not rendered: no groff installed (apt-get install -y groff-base man-db)"
	@command -v h2spec >/dev/null 2>&1 || \
	  echo "NOTE: the HTTP/2 conformance test was SKIPPED: no h2spec installed (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"

# gofmt lists the files it would change; any line fails the target (and is printed, whole).
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# h2spec (HTTP/2 conformance, all cases) against pollbal's TLS listener; docs/http2.md lists the
# cases that fail and why. Needs h2spec on PATH:
# go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
h2spec:
	@command -v h2spec >/dev/null 2>&1 || { echo "h2spec is not installed: go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible"; exit 1; }
	$(GO) test -count=1 -v -run '^TestH2Spec$$' ./cmd/pollbal/

# Go benchmarks: lease selection, the proxy path, the poller at 2,000 backends.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./balancer/ ./proxy/ ./proxy/upstream/
	$(GO) test -run '^$$' -bench BenchmarkPoller2000 -benchtime 1x ./poller/

# Side-by-side load harness against HAProxy, NGINX, Caddy and a minimal fasthttp proxy
# (install the peers once with bench/setup.sh; see bench/README.md). About 2 minutes; the
# results file goes to bench/results/. Knobs pass through the environment, e.g. ROUNDS=3.
bench-harness: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal bench/run.sh

# HTTP/2: pollbal against NGINX (`http2 on`), both on TLS with the same certificate and backends,
# measured with h2load (apt-get install nghttp2-client) at 1, 10 and 100 streams per connection;
# prints the ratio table (about 2 minutes; see bench/README.md). Knobs as bench/h2load.sh --help says.
bench-h2: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal bench/h2load.sh

# The access log's cost: pollbal with the log off and with a JSON log to a file, NGINX without and
# with `access_log ... combined buffer=64k`, side by side in one run (about 2 minutes).
bench-accesslog: build
	TARGETS="nginx nginx-log" POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal \
		PROXY2_CMD='POLLBAL_ACCESS_LOG=access.log bench/pollbal.sh' PROXY2_NAME=pollbal-log bench/run.sh

# Constant rate (open model): vegeta v12.13.0, built from the Go module proxy, sends each target
# fixed rates (RATES, default "1000 3000"; "max" = the highest rate vegeta reaches direct); per
# request: proxy CPU, system calls and context switches (perf), p50/p99/p99.9, the ratio to NGINX.
# About 4 minutes; the results file goes to bench/results/rate-*.md (see bench/README.md).
bench-rate: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal bench/rate.sh

# Large responses: a 60 MiB file downloaded through pollbal and through NGINX from the same static
# NGINX backend, interleaved rounds; prints MiB/s and the pollbal/NGINX ratio (about 40 s).
bench-bigbody: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal bench/bigbody.sh

# Many backends: time until /api/state shows 1,000 to 20,000 backends ready, pollbal's CPU once
# they are, its memory and descriptors (bench/README.md). Several minutes; SCALE_FLAGS passes
# options, e.g. SCALE_FLAGS="-sizes 10000 -runs 2" or "-pollbal before=/tmp/old,after=bin/pollbal".
SCALE_FLAGS ?= -pollbal pollbal=$(BIN)/pollbal
bench-scale: build
	$(GO) build -o $(BIN)/scale ./bench/scale
	$(BIN)/scale $(SCALE_FLAGS)

# Restarts and upgrades under load: wrk -c50 (short and 200 ms requests) while pollbal upgrades
# ten times (SIGUSR2), restarts ten times on held sockets, then the same without state_dir;
# prints socket errors and non-2xx answers per phase (about a minute; bench/upgrade.sh --help).
bench-upgrade: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal BACKEND_BIN=$(CURDIR)/$(BIN)/example-backend bench/upgrade.sh

# The man page, rendered by pollbal itself from its command definitions (pollbal help -man).
man: build
	$(BIN)/pollbal help -man > $(BIN)/pollbal.1

# Static binaries (CGO_ENABLED=0, -trimpath) for PLATFORMS, stamped with VERSION and COMMIT,
# each packed with its man page, LICENSE, README.md, docs, configs/pollbal.yaml and the systemd
# units as DIST/pollbal-VERSION-linux-ARCH.tar.gz; DIST/SHA256SUMS lists them.
# PLATFORMS=linux/amd64 builds one.
release:
	GO="$(GO)" release/release.sh "$(VERSION)" "$(COMMIT)" "$(DIST)" $(PLATFORMS)

# Installs what a release tarball holds, built here (docs/operating.md, "Installing"); an existing
# SYSCONFDIR/pollbal/pollbal.yaml is kept.
install: man
	GO="$(GO)" release/install.sh "$(BIN)" "$(DESTDIR)" "$(PREFIX)" "$(SYSCONFDIR)"

# A FROM scratch image IMAGE:VERSION (and IMAGE:latest) holding the static binary, run as user
# 65532 with the configuration mounted at /etc/pollbal/pollbal.yaml (release/Containerfile).
image:
	GO="$(GO)" release/image.sh build "$(ENGINE)" "$(IMAGE)" "$(VERSION)" "$(COMMIT)"

# Builds the image, runs it on 127.0.0.1 ports with a mounted configuration in front of an
# example backend, checks /healthz, a proxied request, its user and `pollbal version`; says
# what failed and skips where no container engine can run containers.
image-test: build
	GO="$(GO)" release/image.sh test "$(ENGINE)" "$(IMAGE)" "$(VERSION)" "$(COMMIT)" "$(BIN)"

clean:
	rm -rf $(BIN) $(DIST)
