package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
)

// reply is the answer to one request: the server's name and the peer address.
func reply(name string, peer net.Addr) []byte {
	return fmt.Appendf(nil, "%s %s\n", name, peer)
}

// serveTCP answers connections on ln until ctx is cancelled.
func serveTCP(ctx context.Context, ln net.Listener, name string) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go answerTCP(conn, name)
	}
}

// answerTCP writes one reply per line read, until EOF or an error.
func answerTCP(conn net.Conn, name string) {
	defer conn.Close()
	msg := reply(name, conn.RemoteAddr())
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		if _, err := conn.Write(msg); err != nil {
			return
		}
	}
}

// serveUDP answers every datagram on pc until ctx is cancelled.
func serveUDP(ctx context.Context, pc net.PacketConn, name string) error {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 64*1024)
	for {
		_, peer, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		if _, err := pc.WriteTo(reply(name, peer), peer); err != nil {
			return fmt.Errorf("write to %s: %w", peer, err)
		}
	}
}
