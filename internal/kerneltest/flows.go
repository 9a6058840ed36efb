package kerneltest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"
)

// Flows makes n exchanges ("tcp" or "udp") with addr from the named
// namespace, each on a socket of its own: it writes req unless req is
// empty and reads one line. Every socket stays open until the last reply,
// so no two share a source port and each exchange is exactly one
// conntrack flow; a UDP socket that reused a closed one's port would
// join that socket's still-live entry. It returns the replies, trimmed.
func Flows(ns, network, addr string, n int, req []byte, timeout time.Duration) ([]string, error) {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var out []string
	err := InNetns(ns, func() error {
		for i := range n {
			c, err := net.DialTimeout(network, addr, timeout)
			if err != nil {
				return fmt.Errorf("%s %s, flow %d: %w", network, addr, i+1, err)
			}
			conns = append(conns, c)
			line, err := exchange(c, req, timeout)
			if err != nil {
				return fmt.Errorf("%s %s, flow %d: %w", network, addr, i+1, err)
			}
			out = append(out, line)
		}
		return nil
	})
	return out, err
}

func exchange(c net.Conn, req []byte, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if len(req) > 0 {
		if _, err := c.Write(req); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}
