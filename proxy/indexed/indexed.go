package indexed

// Item is an element of a slice that keeps its own position in it. The scanners (the
// listener's over client connections, the watchdog's over backend ones) add and remove
// connections in O(1).
type Item interface {
	Position() *int
}

// Append appends e to s and records its position.
func Append[E Item](s []E, e E) []E {
	*e.Position() = len(s)
	return append(s, e)
}

// Remove removes e from s by moving the last element into its place, marks e as
// removed (-1) and returns the shorter slice. Removing a removed e does nothing.
func Remove[E Item](s []E, e E) []E {
	i := *e.Position()
	if i < 0 {
		return s
	}
	last := len(s) - 1
	s[i] = s[last]
	*s[i].Position() = i
	var zero E
	s[last] = zero
	*e.Position() = -1
	return s[:last]
}
