package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// oneRequest opens a connection to addr, sends one request, reads the
// reply to EOF and closes; it returns the connect time.
func oneRequest(d *net.Dialer, addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	connect := time.Since(start)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var req [reqSize]byte
	if _, err := c.Write(req[:]); err != nil {
		return connect, err
	}
	n, err := io.Copy(io.Discard, c)
	if err == nil && n != respSize {
		err = io.ErrUnexpectedEOF
	}
	return connect, err
}

// requestLoop runs oneRequest back to back until stop, taking the
// addresses in turn from offset, and returns its connect times.
func requestLoop(c clientConfig, offset int, stop *atomic.Bool, ok, failed *atomic.Int64) []time.Duration {
	d := &net.Dialer{Timeout: c.timeout}
	var lat []time.Duration
	for i := offset; !stop.Load(); i++ {
		connect, err := oneRequest(d, c.addrs[i%len(c.addrs)], c.timeout)
		if err != nil {
			failed.Add(1)
			continue
		}
		ok.Add(1)
		lat = append(lat, connect)
	}
	return lat
}

func runShort(c clientConfig) Result { return parallelRequests(c, c.clients) }

func runLatency(c clientConfig) Result { return parallelRequests(c, 1) }

func parallelRequests(c clientConfig, clients int) Result {
	var stop atomic.Bool
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			lat := requestLoop(c, i, &stop, &ok, &failed)
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	time.Sleep(c.duration)
	stop.Store(true)
	wg.Wait()
	secs := time.Since(start).Seconds()
	return Result{Ops: ok.Load(), Errors: failed.Load(), Seconds: secs, Rate: float64(ok.Load()) / secs,
		ConnectP50: percentileUS(all, 50), ConnectP99: percentileUS(all, 99)}
}

// runStream writes into one connection for the duration; Rate is in bits
// per second.
func runStream(c clientConfig) Result {
	conn, err := net.DialTimeout("tcp", c.addrs[0], c.timeout)
	if err != nil {
		return Result{Errors: 1}
	}
	defer conn.Close()
	buf := make([]byte, 256<<10)
	start := time.Now()
	end := start.Add(c.duration)
	_ = conn.SetWriteDeadline(end)
	var sent int64
	for time.Now().Before(end) {
		n, err := conn.Write(buf)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	secs := time.Since(start).Seconds()
	return Result{Ops: sent, Seconds: secs, Rate: float64(sent) * 8 / secs}
}

// runUDP sends DNS-sized queries on long-lived connected sockets, one
// outstanding per client.
func runUDP(c clientConfig) Result {
	var stop atomic.Bool
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range c.clients {
		wg.Go(func() { udpLoop(c, c.addrs[i%len(c.addrs)], &stop, &ok, &failed) })
	}
	time.Sleep(c.duration)
	stop.Store(true)
	wg.Wait()
	secs := time.Since(start).Seconds()
	return Result{Ops: ok.Load(), Errors: failed.Load(), Seconds: secs, Rate: float64(ok.Load()) / secs}
}

// udpQuery is the size of a typical A query.
const udpQuery = 48

func udpLoop(c clientConfig, addr string, stop *atomic.Bool, ok, failed *atomic.Int64) {
	conn, err := net.DialTimeout("udp", addr, c.timeout)
	if err != nil {
		failed.Add(1)
		return
	}
	defer conn.Close()
	q := make([]byte, udpQuery)
	buf := make([]byte, 512)
	for !stop.Load() {
		_ = conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := conn.Write(q); err != nil {
			failed.Add(1)
			continue
		}
		if _, err := conn.Read(buf); err != nil {
			failed.Add(1)
			continue
		}
		ok.Add(1)
	}
}
