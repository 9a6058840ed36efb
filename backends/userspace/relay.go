package userspace

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// copyChunk bounds one splice run, so that the byte counters move during
// long transfers.
const copyChunk = 1 << 20

// relay copies both directions between a client and an endpoint
// connection until both have ended, then closes both.
func relay(client, upstream *net.TCPConn, pm *portMetrics, fromClient *atomic.Uint64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(upstream, client, pm.toEndpoint, fromClient)
	}()
	copyHalf(client, upstream, pm.toClient, nil)
	<-done
	client.Close()
	upstream.Close()
}

// copyHalf copies src to dst until src's EOF, which it passes on as a
// half-close (FIN) of dst, so request/response protocols that shut down
// their sending side keep working. An error on either connection (a reset,
// a write to a closed peer) aborts both, which also ends the other
// direction.
//
// io.CopyN between two *net.TCPConn ends in dst.ReadFrom with an
// *io.LimitedReader around a *net.TCPConn, which Go serves with splice(2)
// on Linux: the payload never enters userspace.
func copyHalf(dst, src *net.TCPConn, counter prometheus.Counter, octets *atomic.Uint64) {
	for {
		n, err := io.CopyN(dst, src, copyChunk)
		counter.Add(float64(n))
		if octets != nil {
			octets.Add(uint64(n))
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			_ = dst.CloseWrite() // the peer may be gone; the other direction notices
			return
		}
		abort(src)
		abort(dst)
		return
	}
}

// abort closes a connection with a reset instead of a FIN.
func abort(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
