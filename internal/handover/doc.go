// Package handover is how pollbal's listening sockets outlive a process: it takes the sockets
// that systemd (socket activation) or an old pollbal (binary upgrade) passed to this process,
// binds the ones nobody passed, hands them all to the new process of an upgrade, and tells the
// service manager what it needs to know (sd_notify). It never accepts on a socket: serving and
// draining stay with the caller.
//
// # What a process inherits
//
// From systemd (sd_listen_fds(3)): LISTEN_PID (must be this process's pid, else the variables
// were meant for another process and are ignored), LISTEN_FDS (how many descriptors, from 3 on)
// and LISTEN_FDNAMES (their names, colon-separated: FileDescriptorName= of each socket unit).
// The names are proxy, tls and admin. Without LISTEN_FDNAMES the descriptors are the configured
// listeners in the order proxy, tls, admin, skipping those the configuration does not have:
// with listen and admin.listen set and no TLS, descriptor 3 is proxy and 4 is admin. A name
// pollbal does not know (systemd names a socket after its unit when FileDescriptorName= is
// missing), a name given twice, or a listener the configuration does not have is an error.
//
// From an old pollbal: POLLBAL_LISTEN_FDS and POLLBAL_LISTEN_FDNAMES (the same facts, always
// named) and POLLBAL_READY_FD (the readiness pipe, right after the sockets). They carry no pid:
// the old process starts the new one with fork and exec and cannot know its pid before it
// runs, and Go runs no code between the two. So these variables are pollbal's own, set only
// for the one process the old one starts, and New removes them (and systemd's) from the
// environment at once, before anything could pass them further. A listener the new
// configuration no longer has is closed by Ready.
//
// Every inherited descriptor is checked to be a listening TCP socket before it is touched,
// then made close-on-exec. Listen hands out an inherited socket only when it listens on the
// configured address; otherwise it is an error (see Listen), never a silent switch.
//
// # An upgrade, step by step
//
//  1. The old process (SIGUSR2 or POST /admin/upgrade) calls Upgrade. It starts the program at
//     the path it was started by — a new binary installed there is the one that runs — with
//     the same arguments, working directory and environment, and passes duplicates of its
//     listeners as descriptors 3, 4, ... plus the write end of a pipe.
//  2. The new process loads its configuration, calls New (with the configured listeners'
//     names) and Listen for each listener, restores its state, starts serving, and calls
//     Ready: one byte down the pipe.
//  3. Upgrade returns the new pid once that byte arrives. If instead the new process exits,
//     is not ready in time (30 s), or the context ends, Upgrade kills it and returns why; the
//     old process has changed nothing and keeps serving. pollbal_upgrades_total counts each
//     result (ok, failed, timeout).
//  4. Under systemd (NOTIFY_SOCKET set), the old process, still the service's main process,
//     sends MAINPID=<new pid> before Upgrade returns ok, so that its exit is not taken for the
//     service's; when that message cannot be sent, the upgrade fails. The old process says it
//     because with Type=notify systemd hears the main process only (NotifyAccess=main, the
//     default), and the unit need not open the socket to every process. The new process says
//     nothing to systemd when it is ready: it is the main process once that message is read.
//     (Slurm's daemons hand over the same way on reconfigure.) Until the old process exits,
//     systemd logs that it supervises a process that is not its child; then the new process is
//     re-parented to it, and its exit is the service's.
//  5. The caller stops accepting: it closes its listeners (proxy and admin shutdown), finishes
//     the requests in flight (shutdown_timeout), and exits 0. Connections that arrive meanwhile
//     wait in the kernel's backlog of the shared socket and are accepted by the new process: a
//     listening socket lives until its last descriptor is closed, and closing the old
//     process's leaves the new process's. This package holds no duplicate of its own (those
//     it passes are closed once the new process started), and Stopping, called on the way
//     out, sends no STOPPING=1 after a hand-over. Nor should the old process write its state
//     file on the way out then: the new process's is newer.
//
// A fresh start under systemd is simpler: New takes the sockets, Listen binds what was not
// passed, and Ready sends READY=1. On the way out, Stopping sends STOPPING=1.
//
// Why this is a small implementation on os/exec rather than tableflip or go-systemd: see the
// commit that added this package.
package handover
