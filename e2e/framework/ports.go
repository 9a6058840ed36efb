package framework

import (
	"fmt"
	"net"
)

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago. All listeners stay open until every port is picked so the kernel
// cannot hand out one port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
