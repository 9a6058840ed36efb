package ipvs_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// The kernel tests run only inside the test VM (hack/vm/vmtest.sh sets
// IPVS_VM=1): they create interfaces, IPVS services, sets and rules, in
// network namespaces of a throw-away kernel.
func requireVM(t testing.TB) {
	t.Helper()
	if os.Getenv("IPVS_VM") != "1" {
		t.Skip("kernel test: runs in the IPVS test VM (hack/vm/test-ipvs.sh)")
	}
}

// newNamedNetns creates /run/netns/NAME with lo up; it is deleted when
// the test ends.
func newNamedNetns(t testing.TB, name string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // this thread ends up inside the new namespace: discard it
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	nl := nlHandle(t, name)
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("%s: lo up: %v", name, err)
	}
}

func nlHandle(t testing.TB, ns string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

func mustPrefix(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// link connects namespace inner to namespace outer with a veth pair:
// inner gets innerAddr (a prefix, e.g. 10.244.1.2/24) and a default
// route via outerAddr's address, outer gets outerAddr.
func link(t testing.TB, outer, inner, name, outerAddr, innerAddr string) {
	t.Helper()
	on, in := nlHandle(t, outer), nlHandle(t, inner)
	innerNS, err := netns.GetFromName(inner)
	if err != nil {
		t.Fatal(err)
	}
	defer innerNS.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(innerNS)}
	steps := []func() error{
		func() error { return on.LinkAdd(veth) },
		func() error { return on.AddrAdd(veth, mustPrefix(outerAddr)) },
		func() error { return on.LinkSetUp(veth) },
		func() error {
			peer, err := in.LinkByName("eth0")
			if err != nil {
				return err
			}
			if err := in.AddrAdd(peer, mustPrefix(innerAddr)); err != nil {
				return err
			}
			if err := in.LinkSetUp(peer); err != nil {
				return err
			}
			gw := mustPrefix(outerAddr).IP
			return in.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: gw})
		},
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("veth %s (%s <-> %s) step %d: %v", name, outer, inner, i, err)
		}
	}
}

// podServer is a TCP server in a pod namespace: it answers every
// connection with "NAME REMOTE-ADDRESS\n" and holds it until the client
// closes.
func podServer(t testing.TB, ns, name, addr string) {
	t.Helper()
	var ln net.Listener
	err := kerneltest.InNetns(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
}

// conn is a client connection and what the server said.
type conn struct {
	net.Conn
	Pod    string
	Source netip.Addr // the client address the server saw
}

// dial connects from namespace ns (from source address src, if valid)
// and reads the server's greeting. The bound on the wait is generous
// (TCG is slow); it is not a timing assertion.
func dial(ns string, src netip.Addr, dst string) (*conn, error) {
	var c net.Conn
	err := kerneltest.InNetns(ns, func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		if src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
		}
		var err error
		c, err = d.Dial("tcp", dst)
		return err
	})
	if err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("read greeting from %s: %w", dst, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	f := strings.Fields(line)
	if len(f) != 2 {
		c.Close()
		return nil, fmt.Errorf("bad greeting %q", line)
	}
	ap, err := netip.ParseAddrPort(f[1])
	if err != nil {
		c.Close()
		return nil, err
	}
	return &conn{Conn: c, Pod: f[0], Source: ap.Addr().Unmap()}, nil
}

// reset closes a connection with a TCP RST (linger 0), so IPVS moves it to
// CLOSE at once instead of TIME_WAIT.
func (c *conn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// ipsetInterface names ipset.Interface for embedding.
type ipsetInterface = ipset.Interface
