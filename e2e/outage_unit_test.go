//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

func TestOutageFailureAttribution(t *testing.T) {
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	udpDial := fmt.Errorf("dial udp 10.96.0.1:80 in netns c: %w", &net.OpError{Op: "dial", Net: "udp", Err: context.DeadlineExceeded})
	tcpDial := fmt.Errorf("dial tcp 10.96.0.1:80 in netns c: %w", &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded})
	udpRead := fmt.Errorf("udp reply: %w", &net.OpError{Op: "read", Net: "udp", Err: context.DeadlineExceeded})
	fs := []outFailure{
		{at: at, err: tcpDial},                                     // a direct probe failed 1 s later: a stall
		{at: at.Add(10 * time.Second), err: udpDial},               // no packet left: the client's
		{at: at.Add(20 * time.Second), err: udpRead},               // the proxy's to answer for
		{at: at.Add(30 * time.Second), err: tcpDial},               // likewise
		{at: at.Add(40 * time.Second), err: errors.New("refused")}, // the direct failure 4 s later is too far
	}
	control := []outFailure{{at: at.Add(time.Second)}, {at: at.Add(44 * time.Second)}}
	if got := unexplained(fs, control); got != 3 {
		t.Errorf("unexplained = %d, want 3 (the UDP read at 20 s, the TCP dial at 30 s, the refusal at 40 s)", got)
	}
}
