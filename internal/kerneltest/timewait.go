package kerneltest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ShortConns makes n TCP connections from the named namespace to addr,
// one after the other, each on a new socket: it writes req unless req is
// empty, reads to the end (the server closes first, so the TIME_WAIT
// sockets are the server's) and closes. It stops at the first failure.
func ShortConns(ns, addr string, n int, req []byte, timeout time.Duration) error {
	return InNetns(ns, func() error {
		for i := range n {
			if err := shortConn(addr, req, timeout); err != nil {
				return fmt.Errorf("connection %d of %d to %s: %w", i+1, n, addr, err)
			}
		}
		return nil
	})
}

func shortConn(addr string, req []byte, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if len(req) > 0 {
		if _, err := c.Write(req); err != nil {
			return err
		}
	}
	_, err = io.Copy(io.Discard, c)
	return err
}

// ShortConnsResult is what a run of ShortConns changed in the kernel: the
// SYNs the server's TIME_WAIT sockets refused (PAWS), and the client's
// SYN retransmits and resets sent.
type ShortConnsResult struct {
	N                     int
	Took                  time.Duration
	PAWSRefused           int64
	SYNRetrans, ResetsOut int64
}

func (r ShortConnsResult) String() string {
	return fmt.Sprintf("%d connections in %v: server TIME_WAIT PAWS refusals %d; client SYN retransmits %d, resets sent %d",
		r.N, r.Took.Round(time.Millisecond), r.PAWSRefused, r.SYNRetrans, r.ResetsOut)
}

// MeasureShortConns runs ShortConns from the client namespace to addr,
// served in the server namespace, and reads what it changed in both.
func MeasureShortConns(client, server, addr string, n int, req []byte, timeout time.Duration) (ShortConnsResult, error) {
	cb, err := ReadNetCounters(client)
	if err != nil {
		return ShortConnsResult{}, err
	}
	sb, err := ReadNetCounters(server)
	if err != nil {
		return ShortConnsResult{}, err
	}
	start := time.Now()
	if err := ShortConns(client, addr, n, req, timeout); err != nil {
		return ShortConnsResult{}, err
	}
	r := ShortConnsResult{N: n, Took: time.Since(start)}
	ca, err := ReadNetCounters(client)
	if err != nil {
		return r, err
	}
	sa, err := ReadNetCounters(server)
	if err != nil {
		return r, err
	}
	cd, sd := ca.Sub(cb), sa.Sub(sb)
	r.PAWSRefused, r.SYNRetrans, r.ResetsOut = sd["TcpExtPAWSTimewait"], cd["TcpExtTCPSynRetrans"], cd["TcpOutRsts"]
	return r, nil
}

// TSOffsetPerPort tells whether this kernel's TCP timestamp offset
// depends on the ports (as since "tcp: secure_seq: add back ports to TS
// offset") rather than on the addresses alone: two connections open at
// once from the named namespace to addr, so from two source ports, read
// their current timestamps (TCP_TIMESTAMP, offset included); offsets of
// the address pair alone give the same value within the millisecond.
func TSOffsetPerPort(ns, addr string, timeout time.Duration) (bool, error) {
	var ts [2]int
	err := InNetns(ns, func() error {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range ts {
			c, err := net.DialTimeout("tcp", addr, timeout)
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			v, err := tcpTimestamp(c.(*net.TCPConn))
			if err != nil {
				return err
			}
			ts[i] = v
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	d := uint32(ts[0]) - uint32(ts[1])
	return min(d, -d) > 1000, nil
}

func tcpTimestamp(c *net.TCPConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_TIMESTAMP) }); err != nil {
		return 0, err
	}
	return v, serr
}

// NetCounters are a namespace's SNMP and extended TCP/IP counters, keyed
// as nstat names them ("TcpExtPAWSTimewait", "TcpRetransSegs").
type NetCounters map[string]int64

// ReadNetCounters reads /proc/net/netstat and /proc/net/snmp inside the
// named namespace.
func ReadNetCounters(ns string) (NetCounters, error) {
	out := NetCounters{}
	for _, f := range []string{"/proc/net/netstat", "/proc/net/snmp"} {
		b, err := exec.Command("ip", "netns", "exec", ns, "cat", f).Output()
		if err != nil {
			return nil, fmt.Errorf("reading %s in %s: %w", f, ns, err)
		}
		if err := parseNetCounters(string(b), out); err != nil {
			return nil, fmt.Errorf("%s in %s: %w", f, ns, err)
		}
	}
	return out, nil
}

// parseNetCounters reads the "Prefix: name name..." / "Prefix: value
// value..." line pairs of /proc/net/netstat and /proc/net/snmp.
func parseNetCounters(text string, out NetCounters) error {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		names := strings.Fields(sc.Text())
		if !sc.Scan() {
			return fmt.Errorf("header %q without values", names)
		}
		values := strings.Fields(sc.Text())
		if len(names) != len(values) || len(names) == 0 || names[0] != values[0] {
			return fmt.Errorf("header %q does not match values %q", names, values)
		}
		prefix := strings.TrimSuffix(names[0], ":")
		for i := 1; i < len(names); i++ {
			v, err := strconv.ParseInt(values[i], 10, 64)
			if err != nil {
				return fmt.Errorf("%s%s: %w", prefix, names[i], err)
			}
			out[prefix+names[i]] = v
		}
	}
	return sc.Err()
}

// Sub returns c minus before, counter by counter.
func (c NetCounters) Sub(before NetCounters) NetCounters {
	out := NetCounters{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// CheckMasqueradeTCPPorts judges r, short connections from namespace
// client to a masqueraded NodePort at addr whose endpoint closes first:
// with the client's TCP port kept in the masquerade no SYN may meet a
// PAWS refusal or be retransmitted; with random ports, on a kernel whose
// TCP timestamp offsets depend on the ports, some must (which shows the
// check sees what keeping the port avoids).
func CheckMasqueradeTCPPorts(tb testing.TB, r ShortConnsResult, keepPort bool, client, addr string, timeout time.Duration) {
	tb.Helper()
	if keepPort {
		if r.PAWSRefused != 0 || r.SYNRetrans != 0 {
			tb.Errorf("TCP ports kept: PAWS refusals %d, SYN retransmits %d; want none", r.PAWSRefused, r.SYNRetrans)
		}
		return
	}
	perPort, err := TSOffsetPerPort(client, addr, timeout)
	if err != nil {
		tb.Fatal(err)
	}
	if !perPort {
		tb.Logf("this kernel's TCP timestamp offsets do not depend on the ports: random ports are not expected to meet PAWS refusals")
	} else if r.PAWSRefused == 0 || r.SYNRetrans == 0 {
		tb.Errorf("random ports, per-port timestamp offsets: PAWS refusals %d, SYN retransmits %d; want both above 0", r.PAWSRefused, r.SYNRetrans)
	}
}
