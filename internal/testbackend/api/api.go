package api

// Stats is the answer of GET /_backend/stats.
type Stats struct {
	ID string `json:"id"`
	// The requests to the paths that do no more than answer (all client paths but /blob,
	// /upload, /switch and /ws): in progress now, the most ever at once, and how many arrived.
	InFlight     int64 `json:"in_flight"`
	PeakInFlight int64 `json:"peak_in_flight"`
	Requests     int64 `json:"requests"`
	// The POST /pool_warning requests accepted, and the body of the latest.
	Warnings    int64  `json:"warnings"`
	LastWarning string `json:"last_warning"`
	// Every client request (all paths but /pool, /pool_warning and /_backend/*), as the
	// capacity limit counts them: capacity (0 = none), in progress now, the most ever at
	// once, and how many were refused with 503 + X-Pool-Full.
	Capacity     int64 `json:"capacity"`
	LoadInFlight int64 `json:"load_in_flight"`
	LoadPeak     int64 `json:"load_peak"`
	Refused      int64 `json:"refused"`
	// WebSockets is the number of WebSocket connections /ws accepted.
	WebSockets int64 `json:"websockets"`
}

// Streams is the answer of GET /_backend/streams: what the endpoints that exercise a proxy's
// streaming saw.
type Streams struct {
	Blobs       int64 `json:"blobs"`        // /blob requests whose whole body was written
	Cancelled   int64 `json:"cancelled"`    // /blob requests whose client connection closed before the end
	Uploads     int64 `json:"uploads"`      // /upload requests read to the end
	UploadBytes int64 `json:"upload_bytes"` // body bytes of the latest complete /upload
	Upgrades    int64 `json:"upgrades"`     // /switch requests answered 101
}
