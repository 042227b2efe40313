package proctest

import (
	"fmt"
	"net"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server the test starts that cannot report the port it picked itself
// (PostgreSQL, versitygw).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
