package pool

// CloseReason says why the pool closed a physical connection (a metric label).
type CloseReason string

// The reasons a connection is closed.
const (
	CloseEvicted          CloseReason = "evicted"           // SoftEvict, or marked by the pool
	CloseMaxLifetime      CloseReason = "max_lifetime"      // passed its (jittered) MaxLifetime
	CloseIdleTimeout      CloseReason = "idle_timeout"      // idle past IdleTimeout above MinIdleConns
	CloseValidationFailed CloseReason = "validation_failed" // failed the probe on acquire
	CloseKeepaliveFailed  CloseReason = "keepalive_failed"  // failed a keepalive ping
	CloseFatalError       CloseReason = "fatal_error"       // a driver call returned a fatal error
	CloseDriverInvalid    CloseReason = "driver_invalid"    // the driver's Validator (release) or SessionResetter (acquire) said so
	CloseResetFailed      CloseReason = "reset_failed"      // the release plan failed or could not reset the session
	ClosePoolClosed       CloseReason = "pool_closed"       // Close
	CloseHookRejected     CloseReason = "hook_rejected"     // BeforeAcquire rejected it, or AfterRelease vetoed its reuse
	CloseHookFailed       CloseReason = "hook_failed"       // a hook returned an error, panicked or timed out on it
	CloseResized          CloseReason = "resized"           // SetMaxConns lowered the limit below the open connections
)
