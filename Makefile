# pollbal — the two commands are `make demo` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     ?= bin
# Extra flags for the demo program, e.g. DEMO_FLAGS="-timings fast -quiet"; DEMO_ROUNDS=N sets
# how many updates each backend makes.
DEMO_FLAGS ?=

.PHONY: all build demo test vet lint bench bench-harness bench-accesslog bench-rate bench-bigbody bench-scale bench-upgrade clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/pollbal ./cmd/pollbal
	$(GO) build -o $(BIN)/example-backend ./examples/backend

# Example backends + pollbal + a rolling update you can watch (Ctrl-C stops everything).
demo: build
	$(GO) run ./scripts/demo -pollbal $(BIN)/pollbal -backend $(BIN)/example-backend $(DEMO_FLAGS)

# vet, then every test (unit, end-to-end with real processes, browser, scripts) under -race,
# then the allocation guards once more without -race (sync.Pool drops items under it).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'Allocs|Allocate' ./proxy/ ./balancer/ ./accesslog/
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  echo "NOTE: the status-page browser test was SKIPPED: no chromium installed (apt-get install -y chromium)"
	@command -v promtool >/dev/null 2>&1 || \
	  echo "NOTE: the alerting-rules test was SKIPPED: no promtool installed (apt-get install -y prometheus)"
	@command -v systemd-analyze >/dev/null 2>&1 || \
	  echo "NOTE: the systemd unit test was SKIPPED: no systemd-analyze installed (apt-get install -y systemd)"
	@command -v shellcheck >/dev/null 2>&1 || \
	  echo "NOTE: the shellcheck tests were SKIPPED: no shellcheck installed (apt-get install -y shellcheck)"

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Go benchmarks: lease selection, the proxy path, the poller at 2,000 backends.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./balancer/ ./proxy/
	$(GO) test -run '^$$' -bench BenchmarkPoller2000 -benchtime 1x ./poller/

# Side-by-side load harness against HAProxy, NGINX, Caddy and a minimal fasthttp proxy
# (install the peers once with bench/setup.sh; see bench/README.md). About 2 minutes; the
# results file goes to bench/results/. Knobs pass through the environment, e.g. ROUNDS=3.
bench-harness: build
	POLLBAL_BIN=$(CURDIR)/$(BIN)/pollbal PROXY_CMD=bench/pollbal.sh PROXY_NAME=pollbal bench/run.sh

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

clean:
	rm -rf $(BIN)
