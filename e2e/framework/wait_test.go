package framework

import (
	"errors"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	errTransient := errors.New("not yet")
	errFatal := errors.New("process exited")
	tests := []struct {
		name      string
		results   []error // one per call; nil means "condition true"
		timeout   time.Duration
		wantErr   error
		wantCalls int
	}{
		{name: "true at once", results: []error{nil}, timeout: time.Hour, wantCalls: 1},
		{name: "transient errors then true", results: []error{errTransient, errTransient, nil}, timeout: time.Hour, wantCalls: 3},
		{name: "permanent error stops polling", results: []error{errTransient, Permanent(errFatal), nil}, timeout: time.Hour, wantErr: errFatal, wantCalls: 2},
		{name: "timeout keeps last error", results: []error{errTransient}, timeout: -time.Second, wantErr: errTransient, wantCalls: 1},
	}
	for _, tc := range tests {
		calls := 0
		err := WaitFor(tc.timeout, func() (bool, error) {
			r := tc.results[min(calls, len(tc.results)-1)]
			calls++
			return r == nil, r
		})
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("%s: WaitFor = %v, want %v", tc.name, err, tc.wantErr)
		}
		if calls != tc.wantCalls {
			t.Errorf("%s: cond called %d times, want %d", tc.name, calls, tc.wantCalls)
		}
	}
}
