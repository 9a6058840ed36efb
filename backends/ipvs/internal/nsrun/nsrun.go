package nsrun

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Runner runs functions in the network namespace Name, or in the
// caller's when Name is empty.
//
// The work runs on a fresh goroutine locked to its OS thread, which
// switches namespace and is never unlocked: when the goroutine ends the
// Go runtime destroys the thread, so no other goroutine ever runs in the
// switched namespace. Processes started from that thread, and files of
// /proc/sys/net opened from it, belong to the namespace.
type Runner struct {
	Name string
}

// Do runs fn in the namespace and returns its error.
func (r Runner) Do(fn func() error) error {
	if r.Name == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: see the type comment.
		h, err := netns.GetFromName(r.Name)
		if err != nil {
			done <- fmt.Errorf("open network namespace %q: %w", r.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			done <- fmt.Errorf("enter network namespace %q: %w", r.Name, err)
			return
		}
		done <- fn()
	}()
	return <-done
}
