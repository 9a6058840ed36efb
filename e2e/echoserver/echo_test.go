package main

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

func TestTCPRepliesOncePerLineUntilEOF(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveTCP(ctx, ln, "pod-a") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveTCP after cancel: %v", err)
		}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "pod-a " + c.LocalAddr().String() + "\n"
	r := bufio.NewReader(c)
	for i := range 3 {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got != want {
			t.Errorf("reply %d = %q, want %q", i, got, want)
		}
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if rest, err := r.ReadString('\n'); err == nil || rest != "" {
		t.Errorf("after EOF got %q, %v; want the server to close", rest, err)
	}
}

func TestUDPRepliesToEveryDatagram(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUDP(ctx, pc, "pod-b") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveUDP after cancel: %v", err)
		}
	}()

	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "pod-b " + c.LocalAddr().String() + "\n"
	buf := make([]byte, 512)
	for i := range 3 {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		// A deadline only so a lost loopback datagram fails instead of hanging.
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if got := string(buf[:n]); got != want {
			t.Errorf("reply %d = %q, want %q", i, got, want)
		}
	}
}
