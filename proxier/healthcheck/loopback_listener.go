package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
)

// ErrAddressInUse is what LoopbackListener returns for an address that is
// already open, as the kernel would (EADDRINUSE).
var ErrAddressInUse = errors.New("address already in use")

// LoopbackListener is a stateful fake Listener for tests. Whatever address
// is requested, it listens on an ephemeral port of 127.0.0.1 and remembers
// which requested address maps to which real one. It keeps the set of open
// listeners (closing a listener removes it), refuses to open a requested
// address twice, and can be told to fail chosen addresses.
type LoopbackListener struct {
	mu   sync.Mutex
	open map[string]*loopbackConn
	fail map[string]error
}

var _ Listener = (*LoopbackListener)(nil)

// NewLoopbackListener returns a LoopbackListener with nothing open.
func NewLoopbackListener() *LoopbackListener {
	return &LoopbackListener{open: map[string]*loopbackConn{}, fail: map[string]error{}}
}

// Listen opens 127.0.0.1:0 and records it as addr.
func (f *LoopbackListener) Listen(ctx context.Context, addr string) (net.Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[addr]; err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if _, ok := f.open[addr]; ok {
		return nil, fmt.Errorf("listen on %s: %w", addr, ErrAddressInUse)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on %s (as 127.0.0.1:0): %w", addr, err)
	}
	c := &loopbackConn{Listener: l, owner: f, requested: addr}
	f.open[addr] = c
	return c, nil
}

// SetFailure makes every later Listen on addr fail with err; a nil err
// clears it.
func (f *LoopbackListener) SetFailure(addr string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, addr)
		return
	}
	f.fail[addr] = err
}

// Addr returns the real "127.0.0.1:port" serving the requested addr, if
// that listener is open.
func (f *LoopbackListener) Addr(requested string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.open[requested]
	if !ok {
		return "", false
	}
	return c.Addr().String(), true
}

// Open lists the requested addresses that are currently open, sorted.
func (f *LoopbackListener) Open() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.open))
	for a := range f.open {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// loopbackConn is one open listener; closing it forgets it.
type loopbackConn struct {
	net.Listener
	owner     *LoopbackListener
	requested string
	once      sync.Once
	closeErr  error
}

func (c *loopbackConn) Close() error {
	c.once.Do(func() {
		c.closeErr = c.Listener.Close()
		c.owner.mu.Lock()
		if c.owner.open[c.requested] == c {
			delete(c.owner.open, c.requested)
		}
		c.owner.mu.Unlock()
	})
	return c.closeErr
}
