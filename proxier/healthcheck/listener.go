package healthcheck

import (
	"context"
	"fmt"
	"net"
)

// Listener opens TCP listening sockets. It is the only way this package
// touches the network, so tests can substitute LoopbackListener.
type Listener interface {
	// Listen opens a TCP listener on addr ("host:port"; an empty host
	// means all local addresses).
	Listen(ctx context.Context, addr string) (net.Listener, error)
}

// NetListener is the real Listener, backed by the kernel's sockets.
type NetListener struct{}

var _ Listener = NetListener{}

// Listen opens a TCP socket on addr.
func (NetListener) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l, nil
}
