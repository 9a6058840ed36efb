package userspace

import (
	"context"
	"testing"
)

// TestServiceTrafficCounts: the relay counts accepted TCP connections and
// the bytes clients send; UDP sessions, datagrams and bytes from clients.
func TestServiceTrafficCounts(t *testing.T) {
	env := newTestEnv(t)
	tcpAddr := tcpService(t, env, 0, startTCPServer(t, "a").addr())
	requests(t, tcpAddr, 3) // "x" each
	samples, err := env.b.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 {
		t.Fatalf("samples %+v, want one for ns/web:p", samples)
	}
	s := samples[0]
	if s.Namespace != "ns" || s.Service != "web" || s.Port != "p" || s.Protocol != "TCP" || s.Family != "IPv4" ||
		s.Connections != 3 || s.Bytes != 3 || s.Packets != 0 {
		t.Errorf("TCP sample %+v, want ns/web:p TCP IPv4, 3 connections, 3 bytes, 0 packets", s)
	}

	env2 := newTestEnv(t)
	udpAddr := udpService(t, env2, startUDPServer(t, "u").addr())
	c := udpClient(t, udpAddr)
	for _, msg := range []string{"one", "two"} {
		udpExchange(t, c, msg)
	}
	samples, err = env2.b.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 || samples[0].Connections != 1 || samples[0].Packets != 2 || samples[0].Bytes != 6 {
		t.Errorf("UDP samples %+v, want 1 session, 2 datagrams, 6 bytes", samples)
	}
}
