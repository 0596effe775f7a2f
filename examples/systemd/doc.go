// Package systemd holds the systemd units for pollbal (pollbal.service, with LoadCredential=
// for the admin token and the warning secret, Type=notify; pollbal.socket and
// pollbal-admin.socket, which hold the listening sockets across restarts) and the
// configuration written for them (pollbal.yaml, which keeps the runtime state in the unit's
// state directory). It has no code: its tests check the units with systemd-analyze, that the
// configuration names the files and directories the service provides (credentials, state,
// logs), and that the sockets are the ones the configuration listens on, under the names
// pollbal knows.
package systemd
