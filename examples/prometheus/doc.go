// Package prometheus holds Prometheus alerting rules for pollbal (pollbal-alerts.yaml) and
// their promtool unit tests (pollbal-alerts_test.yaml). It has no code: its test runs promtool.
// That every metric the rules use exists is checked against a live /metrics in cmd/pollbal.
package prometheus
