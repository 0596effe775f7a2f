package protocol

// Header names of the protocol. Each is written here only; a test holds every other non-test
// file of the module to these constants.
const (
	// HeaderLoad is the /pool answer header in which a backend reports its own load:
	// "<in_flight>/<capacity>" or "<in_flight>" (ParseLoad, FormatLoad).
	HeaderLoad = "X-Pool-Load"
	// HeaderFull, with any value, marks a backend's 503 that refused a client request before
	// doing any work, so that pollbal may send it to another backend whatever its method.
	HeaderFull = "X-Pool-Full"

	// HeaderPrefix starts every header name that pollbal sets (the ones below): an answer from
	// a backend loses any header that starts with it, so that none can pass for pollbal's word.
	HeaderPrefix = "X-Pollbal-"
	// HeaderSite carries the asking instance's site on GET /pool and POST /pool_warning.
	HeaderSite = "X-Pollbal-Site"
	// HeaderTimestamp is a signed warning's Unix time in decimal seconds.
	HeaderTimestamp = "X-Pollbal-Timestamp"
	// HeaderSignature is a signed warning's signature (Sign).
	HeaderSignature = "X-Pollbal-Signature"
	// HeaderBackend names, on a proxied answer, the backend id that answered.
	HeaderBackend = "X-Pollbal-Backend"
	// HeaderPool names, on a proxied answer, the node pool it was served from.
	HeaderPool = "X-Pollbal-Pool"
	// HeaderReason is the reason of an answer pollbal made itself (pool_exhausted, no_app, …).
	HeaderReason = "X-Pollbal-Reason"
)

// Paths a backend serves.
const (
	PathPool    = "/pool"         // GET: what the backend serves (ParsePool)
	PathWarning = "/pool_warning" // POST: the backend must not go down now (Warning)
)
