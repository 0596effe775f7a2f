package main

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"pollbal/configs"
	"pollbal/store"
)

// newMoveStore registers pollbal_store_up and, with admin.store.etcd, builds the etcd store
// (s.moves), which starts from cached: the moves that the state file kept.
func (s *server) newMoveStore(cfg *configs.Config, cached map[string]string) error {
	s.storeUp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pollbal_store_up",
		Help: "1 while the store of admin moves can be used (always, for the local state file), 0 while etcd cannot be reached.",
	})
	s.reg.MustRegister(s.storeUp)
	e := cfg.Admin.Store.Etcd
	if e == nil {
		s.storeUp.Set(1)
		return nil
	}
	creds, problems := loadEtcdFiles(e)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = errors.New(p)
		}
		return errors.Join(errs...)
	}
	var err error
	s.moves, err = store.NewEtcd(store.EtcdOptions{
		Endpoints: e.Endpoints, Prefix: e.Prefix, DialTimeout: e.DialTimeout,
		Username: e.Username, Password: creds.password, TLS: creds.tls,
		Initial: cached,
		Apply:   func(u store.Update) { s.admin.ApplyStore(u) },
		Up:      s.storeChanged,
		Logger:  s.log,
	})
	if err != nil {
		return fmt.Errorf("admin.store.etcd: %w", err)
	}
	return nil
}

// storeChanged follows etcd's reachability: the gauge, a log line, and the deduplicated
// store_unavailable alarm.
func (s *server) storeChanged(up bool, err error) {
	if up {
		s.storeUp.Set(1)
		s.log.Info("etcd store reachable: every move read", "revision", s.moves.Status().Revision)
		s.bal.Events().Add("store", "etcd reachable again: every move read")
		return
	}
	s.storeUp.Set(0)
	why := "unreachable"
	if err != nil {
		why = err.Error()
	}
	s.bal.StoreUnavailable(why)
}

func (s *server) closeMoveStore() {
	if s.moves != nil {
		_ = s.moves.Close()
	}
}
