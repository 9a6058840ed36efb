package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// The child processes. Each runs inside one namespace (started through
// `ip netns exec`), says "ready" on stdout once it serves, and ends when
// its stdin closes (the parent exiting, however it exits, closes it).

const requestSize = 16

// serveRole is the pod's server: for each connection it reads the request
// up to the client's half-close and answers with as many bytes.
func serveRole(port int) error {
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: port})
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, _ := io.ReadAll(c)
				c.Write(req)
			}()
		}
	}()
	return readyThenWait()
}

// userspaceRole runs the userspace backend in this namespace with
// ordinary sockets, as the daemon does, for the one service.
func userspaceRole(nodeIP, clusterIP, endpoint string, port int) error {
	r, err := runner.New(runner.Options{WaitSeconds: 60})
	if err != nil {
		return err
	}
	b, err := userspace.New(userspace.Config{
		Runner: r, NodeIPs: []netip.Addr{netip.MustParseAddr(nodeIP)},
		LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix(podCIDR)),
	})
	if err != nil {
		return err
	}
	defer b.Cleanup(context.Background())
	defer b.Close()
	st := benchState("userspace", clusterIP, port, netip.MustParseAddrPort(endpoint), nodeIP)
	if _, err := b.Sync(context.Background(), st, nil); err != nil {
		return err
	}
	return readyThenWait()
}

func readyThenWait() error {
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// clientRole makes n connections to addr one after the other (after
// warmup unmeasured ones) and prints the result as JSON.
func clientRole(addr string, n, warmup int) error {
	to := netip.MustParseAddrPort(addr)
	for range warmup {
		if _, err := oneConn(to); err != nil {
			return fmt.Errorf("warm-up connection to %s: %w", to, err)
		}
	}
	res := result{Latencies: make([]time.Duration, 0, n)}
	start := time.Now()
	for range n {
		d, err := oneConn(to)
		if err != nil {
			res.Errors++
			continue
		}
		res.Conns++
		res.Latencies = append(res.Latencies, d)
	}
	res.Elapsed = time.Since(start)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// oneConn is one short connection: connect, send the request, half-close,
// read the whole reply, close.
func oneConn(to netip.AddrPort) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(to))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(start.Add(10 * time.Second))
	req := make([]byte, requestSize)
	if _, err := c.Write(req); err != nil {
		return 0, err
	}
	if err := c.CloseWrite(); err != nil {
		return 0, err
	}
	got, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return 0, err
	}
	if len(got) != requestSize {
		return 0, fmt.Errorf("reply of %d bytes, want %d", len(got), requestSize)
	}
	return time.Since(start), nil
}
