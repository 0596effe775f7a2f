package upstream

import "net"

// ClientCheckEvery is how many watchdog scans pass between two checks of the clients of the
// forwards in progress: every 100 ms with WatchdogTick, so a client that went away ends its
// forward (backend connection closed, lease released) well within a second.
const ClientCheckEvery = 4

// clientCheck is one forward's backend connection and its client connection, as found by a
// check.
type clientCheck struct {
	backend *WatchConn
	client  net.Conn
}

// checkClients closes the backend connection of every forward whose client connection has
// been closed or reset. A client that shut down only its write side looks the same from here
// (the next read is the end of input) and counts as gone: an HTTP client that half-closes
// while its request is in flight has left. fasthttp does not read a client connection while its request is being
// handled or its response written, so nothing else would notice before the backend answers (a
// failed write to the client notices only once there is something to write). The reads,
// failures and the lease release then follow from the closed backend connection, as for a
// backend timeout. It uses checks as scratch space, which it returns.
func (w *Watchdog) checkClients(checks []clientCheck) []clientCheck {
	w.mu.Lock()
	for _, c := range w.conns {
		c.cmu.Lock()
		if c.client != nil {
			checks = append(checks, clientCheck{backend: c, client: c.client})
		}
		c.cmu.Unlock()
	}
	w.mu.Unlock()
	for i, ch := range checks {
		w.checkOne(ch)
		checks[i] = clientCheck{}
	}
	return checks
}

// checkOne closes ch's backend connection when ch's client went away (w.gone) and is still
// the client of the connection's forward. The mark (gone) is stored under cmu with that check, and a
// forward's end clears the client under cmu before it reads the mark: a connection still
// serving the gone client is marked before that forward ends, so it is closed there rather
// than pooled for another forward (watchdog.go, invariant 3).
func (w *Watchdog) checkOne(ch clientCheck) {
	if !w.gone(ch.client) {
		return
	}
	c := ch.backend
	c.cmu.Lock()
	same := c.client == ch.client
	if same {
		c.gone.Store(true)
	}
	c.cmu.Unlock()
	if same {
		_ = c.Close()
	}
}
