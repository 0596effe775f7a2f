// Package bench holds the side-by-side load harness: run.sh starts two backends (bench/backend),
// HAProxy, NGINX, Caddy, a minimal fasthttp proxy (bench/refproxy) and optionally pollbal
// (pollbal.sh) on 127.0.0.1 and measures each with wrk at saturation; rate.sh starts the same
// servers and sends each a constant request rate with vegeta, counting the proxy's CPU, system
// calls and context switches per request; lib.sh is what the two share; setup.sh installs the
// peers from the distribution's packages. upgrade.sh runs wrk while pollbal upgrades itself and
// restarts on sockets that sockethold holds (as systemd's socket units do). This package has
// no code of its own: its tests check the scripts.
// bench/scale (make bench-scale) measures pollbal itself with thousands of backends.
package bench
