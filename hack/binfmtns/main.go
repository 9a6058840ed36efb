package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// innerArg marks the re-executed child that sets up the namespace.
const innerArg = "__binfmtns_inner"

// qemuArch maps Debian architecture names to qemu's.
var qemuArch = map[string]string{
	"amd64": "x86_64", "arm64": "aarch64", "armhf": "arm", "ppc64el": "ppc64le",
	"s390x": "s390x", "riscv64": "riscv64", "i386": "i386",
}

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == innerArg {
		err = inner(os.Args[2:])
	} else {
		err = outer(os.Args[1:])
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "binfmtns:", err)
		os.Exit(1)
	}
}

// outer parses the flags and starts the child in new namespaces.
func outer(args []string) error {
	fs := flag.NewFlagSet("binfmtns", flag.ContinueOnError)
	arch := fs.String("arch", "", "Debian architecture of the binaries to run (arm64, ...)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *arch == "" || fs.NArg() == 0 {
		return fmt.Errorf("usage: binfmtns -arch ARCH -- COMMAND [ARGS...]")
	}
	if hostArch() == *arch {
		return run(fs.Args())
	}
	rule, err := handler(*arch)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{innerArg, rule}, fs.Args()...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID,
		UidMappings:                ids,
		GidMappings:                ids,
		GidMappingsEnableSetgroups: true,
		Pdeathsig:                  syscall.SIGKILL,
	}
	return cmd.Run()
}

// inner runs as PID 1 of the new namespaces: it mounts a /proc of its own
// PID namespace and a private binfmt_misc, registers rule, then runs the
// command and reaps whatever it leaves.
func inner(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("inner: want RULE COMMAND...")
	}
	rule, argv := args[0], args[1:]
	// Nothing mounted here may reach the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	const bm = "/proc/sys/fs/binfmt_misc"
	if err := unix.Mount("binfmt_misc", bm, "binfmt_misc", 0, ""); err != nil {
		return fmt.Errorf("mounting a private binfmt_misc (needs Linux 6.7 or newer): %w", err)
	}
	if err := os.WriteFile(bm+"/register", []byte(rule), 0); err != nil {
		return fmt.Errorf("registering %q: %w", rule, err)
	}
	return run(argv)
}

func run(argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}

// handler is qemu-user-static's binfmt rule for a Debian architecture.
func handler(arch string) (string, error) {
	q, ok := qemuArch[arch]
	if !ok {
		return "", fmt.Errorf("unknown architecture %q", arch)
	}
	p := "/usr/lib/binfmt.d/qemu-" + q + ".conf"
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("%w (install qemu-user-static)", err)
	}
	rule := strings.TrimSpace(string(b))
	if !strings.HasPrefix(rule, ":") {
		return "", fmt.Errorf("%s: not a binfmt rule: %q", p, rule)
	}
	return rule, nil
}

// hostArch is the Debian name of the architecture this binary runs on.
func hostArch() string {
	for deb, q := range qemuArch {
		if goArch[runtime.GOARCH] == q {
			return deb
		}
	}
	return runtime.GOARCH
}

var goArch = map[string]string{
	"amd64": "x86_64", "arm64": "aarch64", "arm": "arm", "ppc64le": "ppc64le",
	"s390x": "s390x", "riscv64": "riscv64", "386": "i386",
}
