package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	name := flag.String("name", "", "name to put in every reply (default: the hostname)")
	tcpAddr := flag.String("tcp", ":8080", "TCP listen address; empty disables TCP")
	udpAddr := flag.String("udp", ":8080", "UDP listen address; empty disables UDP")
	flag.Parse()
	if *name == "" {
		*name, _ = os.Hostname()
	}
	if err := run(*name, *tcpAddr, *udpAddr); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}

// run binds both sockets before serving either, so a bind failure exits
// early and a TCP answer means UDP is bound too.
func run(name, tcpAddr, udpAddr string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var servers []func() error
	if tcpAddr != "" {
		ln, err := net.Listen("tcp", tcpAddr)
		if err != nil {
			return fmt.Errorf("listen tcp %s: %w", tcpAddr, err)
		}
		servers = append(servers, func() error { return serveTCP(ctx, ln, name) })
	}
	if udpAddr != "" {
		pc, err := net.ListenPacket("udp", udpAddr)
		if err != nil {
			return fmt.Errorf("listen udp %s: %w", udpAddr, err)
		}
		servers = append(servers, func() error { return serveUDP(ctx, pc, name) })
	}
	errc := make(chan error, len(servers))
	for _, serve := range servers {
		go func() { errc <- serve() }()
	}
	fmt.Printf("ready name=%s tcp=%s udp=%s\n", name, tcpAddr, udpAddr)
	for range servers {
		if err := <-errc; err != nil {
			return err
		}
	}
	return nil
}
