package framework

import (
	"context"
	"sync"
	"time"
)

// HealthPoller reads the daemon's /healthz and /livez at a fixed interval
// and records each answer's status code.
type HealthPoller struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []HealthSample
}

// HealthSample is one poll of both endpoints; a code of 0 means the
// request failed.
type HealthSample struct {
	At          time.Time
	Healthz     int
	Livez       int
	HealthzBody string
}

// PollHealth starts polling d every interval until Stop.
func PollHealth(d *Daemon, every time.Duration) *HealthPoller {
	ctx, cancel := context.WithCancel(context.Background())
	h := &HealthPoller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			s := HealthSample{At: time.Now()}
			s.Healthz, s.HealthzBody, _ = d.Get(ctx, d.HealthzAddr, "/healthz")
			s.Livez, _, _ = d.Get(ctx, d.HealthzAddr, "/livez")
			if ctx.Err() != nil {
				return
			}
			h.mu.Lock()
			h.samples = append(h.samples, s)
			h.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// Stop ends polling and returns the samples.
func (h *HealthPoller) Stop() []HealthSample {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HealthSample(nil), h.samples...)
}

// Samples returns the samples so far; polling goes on.
func (h *HealthPoller) Samples() []HealthSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HealthSample(nil), h.samples...)
}

// CountCodes counts samples per status code of /healthz and /livez.
func CountCodes(samples []HealthSample) (healthz, livez map[int]int) {
	healthz, livez = map[int]int{}, map[int]int{}
	for _, s := range samples {
		healthz[s.Healthz]++
		livez[s.Livez]++
	}
	return healthz, livez
}
