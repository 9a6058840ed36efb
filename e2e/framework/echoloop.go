package framework

import (
	"context"
	"sync"
	"time"
)

// EchoLoop sends one request to an address at a fixed interval, each on a
// new connection, and records every outcome: the continuous client of the
// fault tests.
type EchoLoop struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	results []EchoResult
}

// EchoResult is one request of an EchoLoop.
type EchoResult struct {
	At     time.Time
	Server string // answering server; "" on failure
	Err    error
}

// StartEchoLoop starts the loop from namespace ns; every request has a
// timeout of 2 s. Stop it with Stop.
func StartEchoLoop(ns, proto, addr string, every time.Duration) *EchoLoop {
	return StartEchoLoopTimeout(ns, proto, addr, every, defaultRequestTimeout)
}

// StartEchoLoopTimeout is StartEchoLoop with another timeout per request
// (a heavily loaded machine stalls a request for seconds by itself).
func StartEchoLoopTimeout(ns, proto, addr string, every, timeout time.Duration) *EchoLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &EchoLoop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			at := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, timeout)
			r, err := Echo(rctx, ns, proto, addr)
			rcancel()
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.results = append(l.results, EchoResult{At: at, Server: r.Name, Err: err})
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// Stop ends the loop and returns every result.
func (l *EchoLoop) Stop() []EchoResult {
	l.cancel()
	<-l.done
	return l.Results()
}

// Results returns the results so far.
func (l *EchoLoop) Results() []EchoResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]EchoResult(nil), l.results...)
}

// EchoSummary condenses EchoLoop results.
type EchoSummary struct {
	Total, Failed int
	FirstFailure  error
	// LongestOutage is the longest run of consecutive failures, from the
	// first failed request to the next success (or the last request).
	LongestOutage time.Duration
	Servers       map[string]int
}

// Summarize condenses results taken at or after since.
func Summarize(results []EchoResult, since time.Time) EchoSummary {
	s := EchoSummary{Servers: map[string]int{}}
	var outageStart time.Time
	for _, r := range results {
		if r.At.Before(since) {
			continue
		}
		s.Total++
		if r.Err != nil {
			s.Failed++
			if s.FirstFailure == nil {
				s.FirstFailure = r.Err
			}
			if outageStart.IsZero() {
				outageStart = r.At
			}
			s.LongestOutage = max(s.LongestOutage, r.At.Sub(outageStart))
			continue
		}
		if !outageStart.IsZero() {
			s.LongestOutage = max(s.LongestOutage, r.At.Sub(outageStart))
			outageStart = time.Time{}
		}
		s.Servers[r.Server]++
	}
	return s
}

// FirstSuccessAfter returns when the first successful request at or after t
// started, and whether there was one.
func FirstSuccessAfter(results []EchoResult, t time.Time, ok func(EchoResult) bool) (time.Time, bool) {
	for _, r := range results {
		if !r.At.Before(t) && r.Err == nil && (ok == nil || ok(r)) {
			return r.At, true
		}
	}
	return time.Time{}, false
}
