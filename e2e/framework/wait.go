package framework

import (
	"errors"
	"fmt"
	"time"
)

// pollInterval is how often WaitFor re-evaluates its condition.
const pollInterval = 100 * time.Millisecond

// permanentError marks a condition error that no amount of waiting fixes.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that WaitFor stops polling and returns it at once
// (e.g. the process being waited for has exited).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// WaitFor polls cond until it reports true or timeout passes. An error from
// cond does not stop the polling (the state may still converge) unless it is
// wrapped with Permanent; the last one is part of the timeout error, so a
// failure says what was last seen.
func WaitFor(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := cond()
		if done && err == nil {
			return nil
		}
		if perm := (permanentError{}); errors.As(err, &perm) {
			return perm.err
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("condition not met within %s: %w", timeout, err)
			}
			return fmt.Errorf("condition not met within %s", timeout)
		}
		time.Sleep(pollInterval)
	}
}
