// Package protocol is pollbal's wire protocol with its backends (docs/protocol.md), defined once
// for both sides: pollbal's (poller, warning sender, proxy, admin) and the backend's
// (internal/testbackend, internal/testbackend/poolload).
//
// It owns:
//   - the paths a backend serves: PathPool and PathWarning;
//   - the GET /pool answer: its grammar (ParsePool, FormatPool, MaxPoolLines, ServiceGrammar,
//     VersionGrammar) and the Report each line becomes (Status, Serving, Leaving, EqualReports);
//   - X-Pool-Load (HeaderLoad, ParseLoad, FormatLoad, and the Load it becomes) and X-Pool-Full
//     (HeaderFull);
//   - every X-Pollbal-* header name (HeaderPrefix and one constant per name);
//   - the POST /pool_warning body (Warning: Line, Body and ParseWarning) and its signature
//     (Sign and Verify).
//
// Decisions docs/protocol.md leaves open: every line of a /pool answer counts towards the
// 64-line limit, blank and comment lines included; a line whose first non-blank character is '#'
// is a comment; statuses are lower-case only.
//
// Everything here is a constant, a plain value or a pure function, safe for concurrent use. It
// imports nothing of pollbal, so that every package on either side can use it. A test
// (TestWireNamesDefinedOnce) holds the module to it: no other non-test file spells a header
// name of the protocol.
package protocol
