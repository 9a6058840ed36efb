package framework

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"
)

// EchoPort is where every pod's echo server listens, for TCP and UDP.
const EchoPort = 8080

// startTimeout bounds waiting for a helper process to accept connections.
const startTimeout = 30 * time.Second

// StartEchoServers runs bin (e2e/echoserver) in every pod namespace, named
// after the pod, and waits until each answers from the node namespace.
func StartEchoServers(t testing.TB, bin string, topo *Topology) {
	t.Helper()
	listen := ":" + strconv.Itoa(EchoPort)
	procs := make([]*Process, len(topo.Pods))
	for i, pod := range topo.Pods {
		procs[i] = StartInNetns(t, "echo-"+pod.Name, pod.NS, bin, "-name", pod.Name, "-tcp", listen, "-udp", listen)
	}
	for i, pod := range topo.Pods {
		for _, ip := range pod.IPs {
			if err := waitEcho(procs[i], topo.NodeNS, pod.Name, ip); err != nil {
				t.Fatalf("echo server of %s: %v", pod.Name, err)
			}
		}
	}
}

// waitEcho waits until the echo server p answers as name at ip from ns.
func waitEcho(p *Process, ns, name, ip string) error {
	addr := net.JoinHostPort(ip, strconv.Itoa(EchoPort))
	return WaitFor(startTimeout, func() (bool, error) {
		if err := exitError(p); err != nil {
			return false, err
		}
		r, err := Echo(context.Background(), ns, "tcp", addr)
		if err != nil {
			return false, err
		}
		if r.Name != name {
			return false, fmt.Errorf("%s answered as %q", addr, r.Name)
		}
		return true, nil
	})
}

// StartAPIForward runs bin (hack/nsforward) so that addr of the test
// process's namespace (the apiserver) is reachable at the same addr inside
// ns, and waits until it is.
func StartAPIForward(t testing.TB, bin, ns, addr string) *Process {
	t.Helper()
	p := StartManaged(t, "nsforward-"+ns, bin, "-netns", NetnsPath(ns), "-listen", addr, "-target", addr)
	err := WaitFor(startTimeout, func() (bool, error) {
		if err := exitError(p); err != nil {
			return false, err
		}
		c, err := DialContextIn(context.Background(), ns, "tcp", addr)
		if err != nil {
			return false, err
		}
		return true, c.Close()
	})
	if err != nil {
		t.Fatalf("nsforward into %s: %v", ns, err)
	}
	return p
}
