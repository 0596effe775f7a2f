package handover

import (
	"fmt"
	"net"
)

// notify sends state (newline-separated VAR=value assignments, sd_notify(3)) to the service
// manager's socket: a path, or an abstract socket when it starts with '@' (Go's net package
// maps '@' to the leading NUL). With no socket it does nothing: pollbal was not started by a
// service manager that listens.
func notify(socket, state string) error {
	if socket == "" {
		return nil
	}
	if socket[0] != '/' && socket[0] != '@' {
		return fmt.Errorf("%s=%q: only unix sockets are supported", envNotifySocket, socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify the service manager: %w", err)
	}
	return nil
}
