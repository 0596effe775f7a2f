package handover

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// env is a lookup over a fixed environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

const testPID = 4242

func TestParseEnv(t *testing.T) {
	all := []string{Proxy, TLS, Admin}
	proxyAdmin := []string{Proxy, Admin}
	for _, tc := range []struct {
		name       string
		vars       map[string]string
		configured []string
		want       inheritance
		err        string // in the error; "" for none
	}{
		{name: "nothing", vars: nil, configured: all, want: inheritance{readyFD: -1}},
		{name: "systemd, named",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "admin:proxy"},
			configured: proxyAdmin,
			want:       inheritance{from: fromSystemd, fds: []namedFD{{Admin, 3}, {Proxy, 4}}, readyFD: -1}},
		{name: "systemd, unnamed: the configured listeners in order",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2"},
			configured: proxyAdmin,
			want:       inheritance{from: fromSystemd, fds: []namedFD{{Proxy, 3}, {Admin, 4}}, readyFD: -1}},
		{name: "systemd, unnamed, fewer sockets than listeners: the rest are bound",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "1"},
			configured: all,
			want:       inheritance{from: fromSystemd, fds: []namedFD{{Proxy, 3}}, readyFD: -1}},
		{name: "systemd, no descriptors",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "0"},
			configured: all, want: inheritance{readyFD: -1}},
		{name: "LISTEN_PID of another process",
			vars:       map[string]string{"LISTEN_PID": "4243", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "proxy"},
			configured: all, want: inheritance{readyFD: -1}},
		{name: "no LISTEN_PID",
			vars:       map[string]string{"LISTEN_FDS": "1", "LISTEN_FDNAMES": "proxy"},
			configured: all, want: inheritance{readyFD: -1}},
		{name: "LISTEN_PID without LISTEN_FDS",
			vars:       map[string]string{"LISTEN_PID": "4242"},
			configured: all, want: inheritance{readyFD: -1}},
		{name: "LISTEN_PID garbage",
			vars:       map[string]string{"LISTEN_PID": "42x", "LISTEN_FDS": "1"},
			configured: all, err: `LISTEN_PID="42x" is not a process id`},
		{name: "LISTEN_PID zero",
			vars:       map[string]string{"LISTEN_PID": "0", "LISTEN_FDS": "1"},
			configured: all, err: `LISTEN_PID="0" is not a process id`},
		{name: "LISTEN_FDS garbage",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "two"},
			configured: all, err: `LISTEN_FDS="two" is not a number of descriptors`},
		{name: "LISTEN_FDS negative",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "-1"},
			configured: all, err: `LISTEN_FDS="-1" is not a number of descriptors`},
		{name: "more names than descriptors",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "proxy:admin"},
			configured: proxyAdmin, err: `LISTEN_FDS=1 but LISTEN_FDNAMES="proxy:admin" names 2`},
		{name: "fewer names than descriptors",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "proxy"},
			configured: proxyAdmin, err: `LISTEN_FDS=2 but LISTEN_FDNAMES="proxy" names 1`},
		{name: "systemd's default name: the socket unit's",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "pollbal.socket"},
			configured: all, err: `descriptor 3 is named "pollbal.socket"; pollbal's listeners are named proxy, tls, admin (FileDescriptorName=`},
		{name: "an empty name",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "proxy:"},
			configured: all, err: `descriptor 4 is named ""`},
		{name: "a name twice",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "proxy:proxy"},
			configured: all, err: `"proxy" names more than one descriptor`},
		{name: "a listener the configuration does not have",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "proxy:tls"},
			configured: proxyAdmin, err: `descriptor 4 is the tls listener, which the configuration does not have`},
		{name: "unnamed, more sockets than listeners",
			vars:       map[string]string{"LISTEN_PID": "4242", "LISTEN_FDS": "3"},
			configured: proxyAdmin, err: `LISTEN_FDS=3 sockets without names (LISTEN_FDNAMES), but the configuration has 2 listeners (proxy, admin)`},
		{name: "upgrade",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "2", "POLLBAL_LISTEN_FDNAMES": "proxy:admin", "POLLBAL_READY_FD": "5"},
			configured: proxyAdmin,
			want:       inheritance{from: fromUpgrade, fds: []namedFD{{Proxy, 3}, {Admin, 4}}, readyFD: 5}},
		{name: "upgrade: a listener the new configuration dropped is taken (and closed by Ready)",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "2", "POLLBAL_LISTEN_FDNAMES": "proxy:tls", "POLLBAL_READY_FD": "5"},
			configured: []string{Proxy},
			want:       inheritance{from: fromUpgrade, fds: []namedFD{{Proxy, 3}, {TLS, 4}}, readyFD: 5}},
		{name: "upgrade with no listeners",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "0", "POLLBAL_LISTEN_FDNAMES": "", "POLLBAL_READY_FD": "3"},
			configured: all, want: inheritance{from: fromUpgrade, readyFD: 3}},
		{name: "upgrade wins over systemd's variables",
			vars: map[string]string{"POLLBAL_LISTEN_FDS": "1", "POLLBAL_LISTEN_FDNAMES": "proxy", "POLLBAL_READY_FD": "4",
				"LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "admin"},
			configured: all,
			want:       inheritance{from: fromUpgrade, fds: []namedFD{{Proxy, 3}}, readyFD: 4}},
		{name: "upgrade without names",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "1", "POLLBAL_READY_FD": "4"},
			configured: all, err: "POLLBAL_LISTEN_FDS is set without POLLBAL_LISTEN_FDNAMES"},
		{name: "upgrade without a readiness pipe",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "1", "POLLBAL_LISTEN_FDNAMES": "proxy"},
			configured: all, err: "POLLBAL_LISTEN_FDS is set without POLLBAL_READY_FD"},
		{name: "upgrade, readiness pipe among the sockets",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "2", "POLLBAL_LISTEN_FDNAMES": "proxy:admin", "POLLBAL_READY_FD": "4"},
			configured: all, err: `POLLBAL_READY_FD="4": want a descriptor after the 2 listening ones`},
		{name: "upgrade, readiness pipe garbage",
			vars:       map[string]string{"POLLBAL_LISTEN_FDS": "1", "POLLBAL_LISTEN_FDNAMES": "proxy", "POLLBAL_READY_FD": "x"},
			configured: all, err: `POLLBAL_READY_FD="x"`},
		{name: "a readiness pipe alone",
			vars:       map[string]string{"POLLBAL_READY_FD": "3"},
			configured: all, err: "POLLBAL_READY_FD is set without POLLBAL_LISTEN_FDS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEnv(env(tc.vars), testPID, tc.configured)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if !reflect.DeepEqual(got, inheritance{readyFD: -1}) {
					t.Errorf("with the error, got %+v, want nothing inherited", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestChildEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "LISTEN_PID=1", "LISTEN_FDS=1", "LISTEN_FDNAMES=proxy", "NOTIFY_SOCKET=/run/systemd/notify",
		"POLLBAL_LISTEN_FDS=1", "POLLBAL_LISTEN_FDNAMES=proxy", "POLLBAL_READY_FD=4", "LISTEN_FDS_EXTRA=kept", "HOME=/root",
	}
	want := []string{
		"PATH=/usr/bin", "NOTIFY_SOCKET=/run/systemd/notify", "LISTEN_FDS_EXTRA=kept", "HOME=/root",
		"POLLBAL_LISTEN_FDS=2", "POLLBAL_LISTEN_FDNAMES=proxy:admin", "POLLBAL_READY_FD=5",
	}
	if got := childEnv(environ, []string{Proxy, Admin}); !slices.Equal(got, want) {
		t.Errorf("childEnv:\n got %q\nwant %q", got, want)
	}
	// What childEnv writes, parseEnv reads back.
	vars := map[string]string{}
	for _, kv := range childEnv(nil, []string{Proxy, TLS, Admin}) {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	got, err := parseEnv(env(vars), testPID, []string{Proxy, TLS, Admin})
	want2 := inheritance{from: fromUpgrade, fds: []namedFD{{Proxy, 3}, {TLS, 4}, {Admin, 5}}, readyFD: 6}
	if err != nil || !reflect.DeepEqual(got, want2) {
		t.Errorf("parseEnv(childEnv(...)) = %+v, %v; want %+v", got, err, want2)
	}
}

// FuzzParseEnv: whatever the variables say, parseEnv does not panic, and what it accepts is
// consistent: descriptors from 3 on in order, each name known and once, systemd's only among
// the configured, and the readiness pipe after them.
func FuzzParseEnv(f *testing.F) {
	f.Add("4242", "2", "proxy:admin", true, "", "", "", false)
	f.Add("4242", "1", "", false, "", "", "", false)
	f.Add("", "", "", false, "2", "proxy:tls", "5", true)
	f.Add("4242", "99999999999999999999", "proxy", true, "", "", "", false)
	f.Fuzz(func(t *testing.T, pid, fds, names string, hasNames bool, upFDs, upNames, ready string, upgrade bool) {
		vars := map[string]string{}
		if pid != "" {
			vars[envListenPID] = pid
		}
		if fds != "" {
			vars[envListenFDs] = fds
		}
		if hasNames {
			vars[envListenFDNames] = names
		}
		if upgrade {
			vars[envUpgradeFDs], vars[envUpgradeFDNames], vars[envReadyFD] = upFDs, upNames, ready
		}
		configured := []string{Proxy, Admin}
		got, err := parseEnv(env(vars), testPID, configured)
		if err != nil {
			return
		}
		var seen []string
		for i, f := range got.fds {
			if f.fd != listenFDsStart+i || !slices.Contains(knownNames(), f.name) || slices.Contains(seen, f.name) {
				t.Fatalf("inconsistent %+v", got)
			}
			if got.from == fromSystemd && !slices.Contains(configured, f.name) {
				t.Fatalf("systemd's %s is not configured: %+v", f.name, got)
			}
			seen = append(seen, f.name)
		}
		if got.readyFD != -1 && (got.from != fromUpgrade || got.readyFD < listenFDsStart+len(got.fds)) {
			t.Fatalf("readiness pipe %d: %+v", got.readyFD, got)
		}
	})
}
