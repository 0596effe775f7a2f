package handover

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The environment of a process that inherits sockets. systemd's variables are those of
// sd_listen_fds(3). pollbal's own carry the same facts from an old pollbal to the new one:
// LISTEN_PID cannot be set right by a parent that starts the child with fork and exec, because
// the child's pid is known only after the fork (see doc.go).
const (
	envListenPID      = "LISTEN_PID"
	envListenFDs      = "LISTEN_FDS"
	envListenFDNames  = "LISTEN_FDNAMES"
	envUpgradeFDs     = "POLLBAL_LISTEN_FDS"
	envUpgradeFDNames = "POLLBAL_LISTEN_FDNAMES"
	envReadyFD        = "POLLBAL_READY_FD"
	envNotifySocket   = "NOTIFY_SOCKET"
)

// handoverVars are the variables New takes out of the environment, so that no later child
// (an upgrade's, or any other) inherits them and reads descriptors that are not its own.
// NOTIFY_SOCKET is not one: the process an upgrade starts needs it.
func handoverVars() []string {
	return []string{envListenPID, envListenFDs, envListenFDNames, envUpgradeFDs, envUpgradeFDNames, envReadyFD}
}

// listenFDsStart is the first inherited descriptor (SD_LISTEN_FDS_START): 0, 1 and 2 are the
// standard streams.
const listenFDsStart = 3

// Who handed the sockets over.
const (
	fromSystemd = "systemd"
	fromUpgrade = "upgrade"
)

// namedFD is an inherited descriptor and the listener it is.
type namedFD struct {
	name string
	fd   int
}

// inheritance is what the environment says a process inherited: which descriptor is which
// listener, and where to signal readiness. The zero from means nothing was inherited.
type inheritance struct {
	from    string    // fromSystemd, fromUpgrade or ""
	fds     []namedFD // in descriptor order, from listenFDsStart on
	readyFD int       // the old process's readiness pipe; -1 when none waits
}

// parseEnv reads what the process with id pid inherited, from its environment (lookup is
// os.LookupEnv's shape). configured lists the listeners its configuration has, in the order
// proxy, tls, admin: the order in which a launcher that names no socket passes them.
//
// It follows sd_listen_fds(3): variables for another process (LISTEN_PID unset or not pid)
// mean nothing was inherited; variables that cannot be read are an error. pollbal's own
// variables need no pid: only the old process sets them, for the one process it starts, and
// New removes them from the environment before anything else can start.
func parseEnv(lookup func(string) (string, bool), pid int, configured []string) (inheritance, error) {
	none := inheritance{readyFD: -1}
	if count, ok := lookup(envUpgradeFDs); ok {
		names, hasNames := lookup(envUpgradeFDNames)
		if !hasNames {
			return none, fmt.Errorf("%s is set without %s", envUpgradeFDs, envUpgradeFDNames)
		}
		fds, err := nameFDs(envUpgradeFDs, count, envUpgradeFDNames, names, true, configured, false)
		if err != nil {
			return none, err
		}
		ready, ok := lookup(envReadyFD)
		if !ok {
			return none, fmt.Errorf("%s is set without %s", envUpgradeFDs, envReadyFD)
		}
		readyFD, err := strconv.Atoi(ready)
		if err != nil || readyFD < listenFDsStart+len(fds) {
			return none, fmt.Errorf("%s=%q: want a descriptor after the %d listening ones", envReadyFD, ready, len(fds))
		}
		return inheritance{from: fromUpgrade, fds: fds, readyFD: readyFD}, nil
	}
	if _, ok := lookup(envReadyFD); ok {
		return none, fmt.Errorf("%s is set without %s", envReadyFD, envUpgradeFDs)
	}

	pidText, ok := lookup(envListenPID)
	if !ok {
		return none, nil
	}
	listenPID, err := strconv.Atoi(pidText)
	if err != nil || listenPID <= 0 {
		return none, fmt.Errorf("%s=%q is not a process id", envListenPID, pidText)
	}
	if listenPID != pid {
		return none, nil
	}
	count, ok := lookup(envListenFDs)
	if !ok {
		return none, nil
	}
	names, hasNames := lookup(envListenFDNames)
	fds, err := nameFDs(envListenFDs, count, envListenFDNames, names, hasNames, configured, true)
	if err != nil || len(fds) == 0 {
		return none, err
	}
	return inheritance{from: fromSystemd, fds: fds, readyFD: -1}, nil
}

// nameFDs pairs the count descriptors from listenFDsStart on with their listeners: by names
// (colon-separated, as LISTEN_FDNAMES) when hasNames, else in the order of configured. strict
// refuses a named listener that configured lacks: a socket unit that passes a listener the
// configuration has not would hold clients in its backlog that nothing ever accepts. Without
// strict (an upgrade), such a listener was removed from the configuration since the old
// process started; New closes it.
func nameFDs(countVar, count, namesVar, names string, hasNames bool, configured []string, strict bool) ([]namedFD, error) {
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s=%q is not a number of descriptors", countVar, count)
	}
	if n == 0 {
		return nil, nil
	}
	var list []string
	if hasNames {
		list = strings.Split(names, ":")
		if len(list) != n {
			return nil, fmt.Errorf("%s=%d but %s=%q names %d", countVar, n, namesVar, names, len(list))
		}
	} else {
		if n > len(configured) {
			return nil, fmt.Errorf("%s=%d sockets without names (%s), but the configuration has %d listeners (%s): name them (FileDescriptorName= in the socket unit)",
				countVar, n, namesVar, len(configured), strings.Join(configured, ", "))
		}
		list = configured[:n]
	}
	fds := make([]namedFD, 0, n)
	for i, name := range list {
		fd := listenFDsStart + i
		switch {
		case !slices.Contains(knownNames(), name):
			return nil, fmt.Errorf("%s: descriptor %d is named %q; pollbal's listeners are named %s (FileDescriptorName= in the socket unit)",
				namesVar, fd, name, strings.Join(knownNames(), ", "))
		case slices.ContainsFunc(fds, func(f namedFD) bool { return f.name == name }):
			return nil, fmt.Errorf("%s: %q names more than one descriptor; pollbal serves one socket per listener", namesVar, name)
		case strict && !slices.Contains(configured, name):
			return nil, fmt.Errorf("%s: descriptor %d is the %s listener, which the configuration does not have", namesVar, fd, name)
		}
		fds = append(fds, namedFD{name: name, fd: fd})
	}
	return fds, nil
}

// childEnv is the environment of the process an upgrade starts: environ without any variable
// of a hand-over, plus those that pass it names (the listeners at descriptors 3 on, in order)
// and the readiness pipe right after them.
func childEnv(environ []string, names []string) []string {
	env := make([]string, 0, len(environ)+3)
	for _, kv := range environ {
		key, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(handoverVars(), key) {
			env = append(env, kv)
		}
	}
	return append(env,
		envUpgradeFDs+"="+strconv.Itoa(len(names)),
		envUpgradeFDNames+"="+strings.Join(names, ":"),
		envReadyFD+"="+strconv.Itoa(listenFDsStart+len(names)),
	)
}
