package configtest

import (
	"fmt"
	"time"

	"pollbal/configs"
)

// Capacity is a backend's capacity when a test leaves it out: small, so that a test can fill
// a backend.
const Capacity = 10

// Option changes a configuration New builds; any func(*configs.Config) is one.
type Option = func(*configs.Config)

// New returns a configuration with every top-level default (configs.Default), site "test",
// one service "web" (the YAML's defaults for it), apps and backends, then opts applied in
// order. An app without a service gets "web"; a backend without a
// capacity gets Capacity, one without an address 127.0.0.1:<10000+its index> (nothing listens
// there). apps and backends are copied. Each call returns a new value the caller owns.
func New(apps []configs.App, backends []configs.Backend, opts ...Option) *configs.Config {
	cfg := configs.Default()
	cfg.Site = "test"
	cfg.Services = map[string]configs.Service{"web": {WarningScope: configs.ScopeVersion}}
	for _, a := range apps {
		if a.Service == "" {
			a.Service = "web"
		}
		cfg.Apps = append(cfg.Apps, a)
	}
	for i, b := range backends {
		if b.Capacity == 0 {
			b.Capacity = Capacity
		}
		if b.Address == "" {
			b.Address = fmt.Sprintf("127.0.0.1:%d", 10000+i)
		}
		cfg.Backends = append(cfg.Backends, b)
	}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// Site sets the site name.
func Site(name string) Option { return func(c *configs.Config) { c.Site = name } }

// Service sets (or adds) service name.
func Service(name string, s configs.Service) Option {
	return func(c *configs.Config) { c.Services[name] = s }
}

// WarningThreshold sets warning_threshold of every service.
func WarningThreshold(n int) Option {
	return func(c *configs.Config) {
		for name, s := range c.Services {
			s.WarningThreshold = n
			c.Services[name] = s
		}
	}
}

// Alarms sets the alarms section.
func Alarms(a configs.Alarms) Option { return func(c *configs.Config) { c.Alarms = a } }

// Queue turns the queue on: proxy.queue_timeout and proxy.max_queue.
func Queue(timeout time.Duration, max int) Option {
	return func(c *configs.Config) { c.Proxy.QueueTimeout, c.Proxy.MaxQueue = timeout, max }
}
