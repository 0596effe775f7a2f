// Package poller checks backends with GET /pool and publishes what it finds.
//
// Its one concern is turning /pool answers into per-backend readiness: a Poller checks every
// target once per interval, with first checks spread evenly across the interval (target i of n
// at i*interval/n), reads each answer with protocol.ParsePool and protocol.ParseLoad (the
// grammar lives there), applies rise/fall and exponential backoff, and hands every check's
// Result to a Sink, which it asks after a good check whether to check that target again soon
// (Sink.ConfirmAfter, bounded to a few in a row). It knows nothing about node pools, warnings or
// the proxy.
//
// Decisions the protocol (docs/protocol.md) leaves open:
//   - The first good check ever makes a target ready whatever poll.rise says, so that a starting
//     pollbal serves after one round; rise applies to every later recovery.
//   - A failing target is checked after interval, then 2x, 4x, ... up to poll.max_backoff, without
//     jitter (targets keep their spread phases); its first good check restores the interval.
//   - pollbal_checks_total results: ok; error (connection error, status other than 200);
//     timeout; invalid (body over max_body, or an answer that does not parse).
//   - A log line is written on ready/not-ready transitions and when the reason changes, never
//     once per check.
package poller
