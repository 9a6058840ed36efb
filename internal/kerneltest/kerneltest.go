package kerneltest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// EnvVar enables kernel tests.
const EnvVar = "SWITCHYARD_KERNEL_TESTS"

// Require skips the test unless it runs as root with SWITCHYARD_KERNEL_TESTS=1.
func Require(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 || os.Getenv(EnvVar) != "1" {
		tb.Skip("kernel test: needs root and " + EnvVar + "=1")
	}
}

// Run runs a command (arguments only, no shell) and fails the test if it
// fails. It returns the combined output.
func Run(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// NewNetns creates a network namespace named "<prefix>-<random>" with
// loopback up, and deletes it when the test ends, failed or not.
func NewNetns(tb testing.TB, prefix string) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	name := prefix + "-" + hex.EncodeToString(b[:])
	Run(tb, "ip", "netns", "add", name)
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	Run(tb, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// InNetns runs fn on a fresh OS thread switched into the named namespace.
// The thread is never unlocked, so the runtime destroys it afterwards and
// no other goroutine ever runs in that namespace. Sockets fn opens stay in
// the namespace.
func InNetns(name string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(name)
		if err != nil {
			done <- fmt.Errorf("open netns %s: %w", name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			done <- fmt.Errorf("enter netns %s: %w", name, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// ProcessCPU is the user and system CPU time used so far by this process
// and by its waited-for children (iptables-restore, iptables-save, ...),
// to measure what an operation costs beyond its wall time. Zero if
// getrusage fails.
func ProcessCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return 0
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
