package main

import (
	"errors"
	"flag"
	"io"
	"net"
)

// reqSize and respSize shape the short request/response: a small request
// and a reply of a small HTTP response's size.
const (
	reqSize  = 64
	respSize = 256
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	rr := fs.String("rr", ":9000", "TCP: one reply per connection, then close")
	sink := fs.String("sink", ":9001", "TCP: read and discard")
	udp := fs.String("udp", ":9002", "UDP: echo every datagram")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rrLn, err := net.Listen("tcp", *rr)
	if err != nil {
		return err
	}
	sinkLn, err := net.Listen("tcp", *sink)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", *udp)
	if err != nil {
		return err
	}
	errs := make(chan error, 3)
	go func() { errs <- acceptLoop(rrLn, answerOnce) }()
	go func() { errs <- acceptLoop(sinkLn, discard) }()
	go func() { errs <- echoUDP(pc) }()
	return <-errs
}

func acceptLoop(ln net.Listener, handle func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go handle(c)
	}
}

// answerOnce reads one request, writes one reply and closes: the server
// closes first, so TIME_WAIT stays on the server side.
func answerOnce(c net.Conn) {
	defer c.Close()
	buf := make([]byte, respSize)
	if _, err := io.ReadFull(c, buf[:reqSize]); err != nil {
		return
	}
	_, _ = c.Write(buf)
}

func discard(c net.Conn) {
	defer c.Close()
	_, _ = io.Copy(io.Discard, c)
}

func echoUDP(pc net.PacketConn) error {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		_, _ = pc.WriteTo(buf[:n], from)
	}
}
