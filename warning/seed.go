package warning

// Seed sets who was warned before the first round: the backends a previous process warned, as
// its state says. The first round then records warning_started and warning_stopped events only
// for what changed since, not for every backend the previous process already warned. Ids the
// configuration does not list are left out. Call it before the first Round.
func (t *Tracker) Seed(warned []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.warned = make(map[string]bool, len(warned))
	for _, id := range warned {
		if t.known[id] {
			t.warned[id] = true
		}
	}
}
