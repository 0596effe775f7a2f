package poller

import "pollbal/protocol"

// Seed makes the targets start from the results a previous process published, and returns how
// many it seeded. A target whose ID and Address match a ready result is ready from the start,
// with that result's reports, load report and check time, and its checks treat it as a target
// found ready: fall failed checks in a row make it not ready (one with fall 1), and until then
// it keeps those reports. Results that are not ready, and targets without a result, start as
// usual: not ready until a first good check, which makes them ready at once. Seeded targets
// still count towards the first round. Seed must come before Run; after it, it does nothing.
func (p *Poller) Seed(results []Result) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ran {
		return 0
	}
	n := 0
	for _, r := range results {
		t := p.targets[r.ID]
		if t == nil || t.Address != r.Address || !r.Ready {
			continue
		}
		reports := r.Reports
		if reports == nil {
			reports = []protocol.Report{} // ready in no service: a good answer's reports are never nil
		}
		t.health = health{ready: true, everGood: true}
		t.lastGood = reports
		t.lastLoad = r.Load
		t.last = Result{ID: t.ID, Address: t.Address, Ready: true, Reports: reports, Load: r.Load, Checked: r.Checked}
		n++
	}
	return n
}
