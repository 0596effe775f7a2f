package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	web1 := Backend{Address: "127.0.0.1:9001", ID: "web-1", Ready: true}
	web2 := Backend{Address: "localhost:9002", ID: "web-2"}
	gone := Backend{Address: "127.0.0.1:9009", ID: "old"}
	file := func(mutate func(*File)) *File {
		f := &File{Version: Version, Site: "eu", Written: now.Add(-5 * time.Second), Backends: []Backend{web1, web2, gone}}
		if mutate != nil {
			mutate(f)
		}
		return f
	}
	// Addresses are keyed as configs.AddressKey does: localhost is 127.0.0.1 there.
	key := func(a string) string { return strings.Replace(a, "localhost", "127.0.0.1", 1) }
	configured := map[string]bool{"127.0.0.1:9001": true, "127.0.0.1:9002": true, "127.0.0.1:9003": true}
	tests := []struct {
		name        string
		file        *File
		readErr     error
		wantRestore bool
		wantWhy     string // a part of Why; "" = empty
		wantIDs     []string
		wantDropped int
	}{
		{name: "no file: nothing to say", readErr: fmt.Errorf("open: %w", fs.ErrNotExist)},
		{name: "unreadable", readErr: errors.New("decode runtime state: unexpected EOF"), wantWhy: "unreadable: decode runtime state: unexpected EOF"},
		{name: "fresh, same site: the configured addresses", file: file(nil), wantRestore: true, wantIDs: []string{"web-1", "web-2"}, wantDropped: 1},
		{name: "just under restore_max_age", file: file(func(f *File) { f.Written = now.Add(-30*time.Second + time.Millisecond) }), wantRestore: true, wantIDs: []string{"web-1", "web-2"}, wantDropped: 1},
		{name: "at restore_max_age: too old", file: file(func(f *File) { f.Written = now.Add(-30 * time.Second) }), wantWhy: "written 30s ago, not less than poll.restore_max_age (30s)"},
		{name: "an hour old", file: file(func(f *File) { f.Written = now.Add(-time.Hour) }), wantWhy: "written 1h0m0s ago"},
		{name: "other site", file: file(func(f *File) { f.Site = "us" }), wantWhy: `written by site "us", this is site "eu"`},
		{name: "other version", file: file(func(f *File) { f.Version = 2 }), wantWhy: "version 2; this pollbal reads version 1 only"},
		{name: "version missing", file: file(func(f *File) { f.Version = 0 }), wantWhy: "version 0"},
		{name: "no time", file: file(func(f *File) { f.Written = time.Time{} }), wantWhy: "no time of writing"},
		{name: "a little in the future: same clock, fine", file: file(func(f *File) { f.Written = now.Add(500 * time.Millisecond) }), wantRestore: true, wantIDs: []string{"web-1", "web-2"}, wantDropped: 1},
		{name: "far in the future: clock set back", file: file(func(f *File) { f.Written = now.Add(time.Hour) }), wantWhy: "in the future"},
		{name: "none of the configured backends", file: file(func(f *File) { f.Backends = []Backend{gone} }), wantWhy: "none of the configured backends", wantDropped: 1},
		{name: "empty list", file: file(func(f *File) { f.Backends = nil }), wantWhy: "none of the configured backends"},
		{name: "an address listed twice: the first entry", file: file(func(f *File) {
			f.Backends = []Backend{web1, {Address: "127.0.0.1:9001", ID: "second"}}
		}), wantRestore: true, wantIDs: []string{"web-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{File: tt.file, ReadErr: tt.readErr, Site: "eu", Now: now, MaxAge: 30 * time.Second, Configured: configured, Key: key})
			if d.Restore != tt.wantRestore {
				t.Errorf("Restore = %v, want %v (why %q)", d.Restore, tt.wantRestore, d.Why)
			}
			if (tt.wantWhy == "") != (d.Why == "") || !strings.Contains(d.Why, tt.wantWhy) {
				t.Errorf("Why = %q, want %q", d.Why, tt.wantWhy)
			}
			var ids []string
			for _, k := range []string{"127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"} {
				if b, ok := d.Backends[k]; ok {
					ids = append(ids, b.ID)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tt.wantIDs, ",") || len(d.Backends) != len(tt.wantIDs) {
				t.Errorf("restores %v (%d entries), want %v", ids, len(d.Backends), tt.wantIDs)
			}
			if d.Dropped != tt.wantDropped {
				t.Errorf("Dropped = %d, want %d", d.Dropped, tt.wantDropped)
			}
		})
	}
}
