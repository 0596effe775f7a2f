// Package grafana holds a Grafana dashboard for pollbal (pollbal-dashboard.json). It has no
// code: its test checks the dashboard's shape; that every metric its queries use exists is
// checked against a live /metrics in cmd/pollbal.
package grafana
