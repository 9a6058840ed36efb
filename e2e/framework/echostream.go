package framework

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// EchoStream keeps one connection (TCP) or one socket with one source port
// (UDP) open and exchanges a request and its reply over it at a fixed
// interval: an established flow across a change of the node's proxy. A
// TCP connection that fails once is not reopened: every later request
// fails too, so a reset shows as an outage to the end.
type EchoStream struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	results []EchoResult
}

// StartEchoStream dials addr from namespace ns and starts the exchanges;
// every reply must come within timeout. Stop it with Stop.
func StartEchoStream(ns, proto, addr string, every, timeout time.Duration) (*EchoStream, error) {
	dctx, dcancel := context.WithTimeout(context.Background(), defaultRequestTimeout)
	conn, err := DialContextIn(dctx, ns, proto, addr)
	dcancel()
	if err != nil {
		return nil, fmt.Errorf("dial %s %s from %s: %w", proto, addr, ns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &EchoStream{cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, conn, proto, every, timeout)
	return s, nil
}

func (s *EchoStream) run(ctx context.Context, conn net.Conn, proto string, every, timeout time.Duration) {
	defer close(s.done)
	defer conn.Close()
	rd := bufio.NewReader(conn)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var broken error
	for {
		r := EchoResult{At: time.Now()}
		if broken != nil {
			r.Err = broken
		} else {
			r.Server, r.Err = exchange(conn, rd, timeout)
			if r.Err != nil && proto == "tcp" {
				broken = fmt.Errorf("connection broken earlier: %w", r.Err)
			}
		}
		s.mu.Lock()
		s.results = append(s.results, r)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// exchange writes one request and reads one reply line. A UDP reply lost
// leaves nothing in the reader: the next exchange starts clean.
func exchange(conn net.Conn, rd *bufio.Reader, timeout time.Duration) (string, error) {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		rd.Reset(conn)
		return "", err
	}
	r, err := ParseEchoReply(line)
	return r.Name, err
}

// Results returns the results so far; the stream keeps running.
func (s *EchoStream) Results() []EchoResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EchoResult(nil), s.results...)
}

// Stop ends the exchanges and returns every result.
func (s *EchoStream) Stop() []EchoResult {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EchoResult(nil), s.results...)
}
