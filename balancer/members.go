package balancer

import "pollbal/protocol"

// EachReady calls fn once per ready backend of the current snapshot with its address, the node
// pool it belongs to now and its reports of declared services: the members view the warning
// round reads after each check round. Reports are immutable; fn must not modify them.
func (b *Balancer) EachReady(fn func(id, address, pool string, reports []protocol.Report)) {
	for _, m := range b.Snapshot().members {
		if h := m.b.Health(); h.Ready {
			fn(m.cfg.ID, m.cfg.Address, m.pool, h.Reports)
		}
	}
}
