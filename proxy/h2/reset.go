package h2

// resetAllowance is how many streams a connection may have reset by its client beyond those
// it let complete before it is cut off. A browser leaving a page resets the streams it no
// longer needs, a few dozen at most; a rapid-reset client resets every stream it opens, so it
// is cut off after at most this many, each of which may have started one forward.
const resetAllowance = 100

// afterReset is a connection's reset debt after its client reset a stream, and whether the
// connection must be cut off: the debt grows by one per reset and shrinks by one per
// completed stream (afterCompleted), so a client is cut off only when its resets outrun what
// it lets complete by more than resetAllowance.
func afterReset(debt int64) (next int64, cut bool) {
	next = debt + 1
	return next, next > resetAllowance
}

// afterCompleted is a connection's reset debt after one of its streams completed: one less,
// never below zero (completed streams earn no credit for resets to come).
func afterCompleted(debt int64) int64 {
	return max(debt-1, 0)
}
