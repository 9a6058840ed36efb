package healthcheck

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
)

func TestNetListenerRejectsAddressInUse(t *testing.T) {
	l, err := NetListener{}.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = NetListener{}.Listen(context.Background(), l.Addr().String())
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second Listen on %s = %v, want EADDRINUSE", l.Addr(), err)
	}
}

// TestProxierHealthRunRealSocket runs the health server on a real kernel
// socket on loopback.
func TestProxierHealthRunRealSocket(t *testing.T) {
	nl := notifyingListener{inner: NetListener{}, opened: make(chan string, 1)}
	s := NewProxierHealthServer(ProxierHealthConfig{Listener: nl})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, "127.0.0.1:0") }()
	addr := <-nl.opened

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if p := get(t, client, "http://"+addr+"/livez"); p.code != http.StatusOK {
		t.Errorf("/livez = %d, want 200", p.code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if _, err := client.Get("http://" + addr + "/livez"); err == nil {
		t.Errorf("server on %s still answering after Run returned", addr)
	}
}
