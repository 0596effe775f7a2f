// Package scripts holds the backend-side shell tools of pollbal's rolling-update protection
// (docs/rolling-updates.md) and their tests: pollbal-update.sh, the update loop that announces leaving,
// drains, updates and comes back unless pollbal's /pool_warning lock is fresh, and
// pool-warning.cgi, a CGI /pool_warning handler that touches that lock. The Go code here is
// tests only; they run the real scripts as processes on temporary files.
package scripts
