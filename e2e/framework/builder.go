package framework

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
)

// Main packages the e2e tests run, relative to the repository root, and the
// environment variables that may point at a prebuilt binary instead (the
// VM run, hack/vm/e2e-ipvs.sh, has no Go toolchain inside).
const (
	DaemonPkg        = "./cmd/switchyard"
	DaemonBinEnv     = "SWITCHYARD_BIN"
	EchoServerPkg    = "./e2e/echoserver"
	EchoServerBinEnv = "SWITCHYARD_ECHOSERVER_BIN"
	NSForwardPkg     = "./hack/nsforward"
	NSForwardBinEnv  = "SWITCHYARD_NSFORWARD_BIN"
)

// Builder builds the repository's main packages once per test run.
type Builder struct {
	root string
	dir  string

	mu    sync.Mutex
	built map[string]string // package -> binary path
}

// NewBuilder builds packages of the module at root into dir.
func NewBuilder(root, dir string) *Builder {
	return &Builder{root: root, dir: dir, built: make(map[string]string)}
}

// Binary returns the path of pkg's executable, building it on first use. If
// envVar names a non-empty environment variable, its value is used as the
// path instead (it must exist).
func (b *Builder) Binary(ctx context.Context, pkg, envVar string) (string, error) {
	if envVar != "" {
		if p := os.Getenv(envVar); p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%s=%s: %w", envVar, p, err)
			}
			return p, nil
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p, ok := b.built[pkg]; ok {
		return p, nil
	}
	out := filepath.Join(b.dir, path.Base(pkg))
	argv := []string{"go", "build", "-C", b.root, "-o", out, pkg}
	if err := runCommand(ctx, argv); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	b.built[pkg] = out
	return out, nil
}
