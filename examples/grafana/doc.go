// Package grafana holds a Grafana dashboard for pollbal (pollbal-dashboard.json). It has no
// code: its tests check the dashboard's shape, and that a freshly started pollbal exposes
// every metric its queries use (so no panel shows "No data" until a first event); that they
// exist after traffic is checked against a live /metrics in cmd/pollbal too.
package grafana
