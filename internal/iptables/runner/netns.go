package runner

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// nsRunner runs functions inside a named network namespace, or in the
// caller's when name is empty.
//
// A process started by fork/exec inherits the network namespace of the OS
// thread that forks it. So the work runs on a fresh goroutine locked to its
// thread, which switches namespace and is never unlocked: when the
// goroutine ends the runtime destroys the thread, so no other goroutine can
// ever run in the switched namespace, even if switching back would fail.
// Threads the runtime creates meanwhile come from its template thread, not
// from this one.
type nsRunner struct {
	name string
}

func (n nsRunner) do(fn func() error) error {
	if n.name == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: see the type comment.
		h, err := netns.GetFromName(n.name)
		if err != nil {
			done <- fmt.Errorf("open network namespace %q: %w", n.name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			done <- fmt.Errorf("enter network namespace %q: %w", n.name, err)
			return
		}
		done <- fn()
	}()
	return <-done
}
