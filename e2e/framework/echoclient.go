package framework

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// defaultRequestTimeout bounds one echo request when ctx has no deadline.
const defaultRequestTimeout = 2 * time.Second

// EchoReply is what e2e/echoserver answers: its name and the source address
// of the request as the server saw it.
type EchoReply struct {
	Name   string // the answering server's -name, e.g. "pod0"
	Source string // "ip:port" the server saw; shows whether SNAT happened
}

// SourceIP is the IP part of Source.
func (r EchoReply) SourceIP() string {
	host, _, err := net.SplitHostPort(r.Source)
	if err != nil {
		return r.Source
	}
	return host
}

// ParseEchoReply parses one "NAME IP:PORT\n" reply line.
func ParseEchoReply(line string) (EchoReply, error) {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return EchoReply{}, fmt.Errorf("malformed echo reply %q", line)
	}
	if _, _, err := net.SplitHostPort(fields[1]); err != nil {
		return EchoReply{}, fmt.Errorf("malformed source in echo reply %q: %w", line, err)
	}
	return EchoReply{Name: fields[0], Source: fields[1]}, nil
}

// Echo sends one request over TCP or UDP (proto "tcp" / "udp") from a socket
// in namespace ns to addr and returns the reply.
func Echo(ctx context.Context, ns, proto, addr string) (EchoReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	conn, err := DialContextIn(ctx, ns, proto, addr)
	if err != nil {
		return EchoReply{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return EchoReply{}, fmt.Errorf("set deadline: %w", err)
	}
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		return EchoReply{}, fmt.Errorf("%s request to %s from %s: %w", proto, addr, ns, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return EchoReply{}, fmt.Errorf("%s reply from %s to %s: %w", proto, addr, ns, err)
	}
	return ParseEchoReply(line)
}

// EchoMany sends n independent requests (a new connection or socket each, so
// a new source port each) and counts answers per server name. Failed requests
// are counted under the empty name; the last error is returned with the counts.
func EchoMany(ctx context.Context, ns, proto, addr string, n int) (map[string]int, error) {
	counts := make(map[string]int)
	var lastErr error
	for range n {
		r, err := Echo(ctx, ns, proto, addr)
		if err != nil {
			lastErr = err
		}
		counts[r.Name]++
	}
	return counts, lastErr
}
