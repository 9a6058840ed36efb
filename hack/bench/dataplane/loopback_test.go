package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// loopbackServers starts the serve side's three handlers on host's
// loopback address, on free ports, and returns their addresses (rr, sink,
// udp); ok is false when the address family is not available here.
func loopbackServers(t *testing.T, host string) (rr, sink, udp string, ok bool) {
	t.Helper()
	rrLn, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", "", "", false
	}
	sinkLn, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rrLn.Close(); _ = sinkLn.Close(); _ = pc.Close() })
	go func() { _ = acceptLoop(rrLn, answerOnce) }()
	go func() { _ = acceptLoop(sinkLn, discard) }()
	go func() { _ = echoUDP(pc) }()
	return rrLn.Addr().String(), sinkLn.Addr().String(), pc.LocalAddr().String(), true
}

// TestWorkloadsOverLoopback runs every workload through runClient, with
// its -addr flag as the harness passes it, against servers on IPv4's and
// IPv6's loopback: each makes progress and fails nothing.
func TestWorkloadsOverLoopback(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			rr, sink, udp, ok := loopbackServers(t, host)
			if !ok {
				t.Skipf("no %s here", host)
			}
			if strings.Contains(host, ":") && !strings.HasPrefix(rr, "[") {
				t.Fatalf("IPv6 address %q without brackets", rr)
			}
			for workload, addr := range map[string]string{
				"short": rr + "," + rr, "latency": rr, "stream": sink, "udp": udp + "," + udp,
			} {
				res, err := runClient(workload, []string{"-addr", addr, "-clients", "2", "-duration", "200ms"})
				if err != nil {
					t.Fatalf("%s -addr %s: %v", workload, addr, err)
				}
				if res.Ops == 0 || res.Errors != 0 || res.Workload != workload {
					t.Errorf("%s -addr %s: %+v", workload, addr, res)
				}
			}
		})
	}
}

// TestOneRequestRefused: a port nothing listens on is an error, not a
// connect time.
func TestOneRequestRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if _, err := oneRequest(&net.Dialer{Timeout: time.Second}, addr, time.Second); err == nil {
		t.Errorf("a request to closed %s succeeded", addr)
	}
}
