// Package accesslog records every request: one line per request, in JSON or NGINX's combined
// format, written when the request ends (docs/access-log.md describes the fields).
//
// A Record is what the data plane fills while it serves a request; AppendJSON and
// AppendCombined format it without allocating; Filter.Keep, a pure function, decides whether it
// is logged. A Logger formats on the caller's goroutine and hands the line to its one writer
// goroutine through a bounded buffer: when a slow disk lets 16 buffers of lines pile up, new
// lines are dropped and counted, never waited for. Reopen (SIGUSR1, logrotate) and Update (a
// reload) switch files without losing a line. The request ID and W3C trace context helpers
// (ValidRequestID, AppendNewRequestID, TraceID) belong here because the log is where the IDs
// end up.
package accesslog
