// Package nginx holds an example static-file + CGI pollbal backend: an nginx.conf template
// (nginx.conf.in) and run.sh, which renders it into a prefix directory and runs nginx with
// fcgiwrap, serving GET /pool from a file and POST /pool_warning through
// scripts/pool-warning.cgi. The Go code here is tests only: they start the real nginx and
// fcgiwrap on 127.0.0.1 and skip when those binaries are not installed.
package nginx
