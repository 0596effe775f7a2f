// Package systemd holds the systemd unit for pollbal (pollbal.service, with LoadCredential=
// for the admin token and the warning secret) and the configuration written for it
// (pollbal.yaml). It has no code: its tests check the unit with systemd-analyze and that the
// configuration names the files and directories the unit provides (credentials, state, logs).
package systemd
