package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// daemonTokenTTL outlives any e2e run; TokenRequest tokens cannot be renewed
// by the daemon from a kubeconfig file.
const daemonTokenTTL = 12 * time.Hour

// Suite is what all e2e tests of one `go test` run share. Create it in
// TestMain with NewSuite and Close it after m.Run.
type Suite struct {
	Root    string   // repository root
	Cluster *Cluster // admin access
	Bins    *Builder
	// EchoServerBin and NSForwardBin are built at suite start (or taken from
	// $SWITCHYARD_ECHOSERVER_BIN / $SWITCHYARD_NSFORWARD_BIN); the daemon is
	// built on first StartDaemon (or taken from $SWITCHYARD_BIN).
	EchoServerBin string
	NSForwardBin  string
	// DaemonKubeconfig authenticates as ServiceAccount kube-system/switchyard
	// with the RBAC from deploy/.
	DaemonKubeconfig string

	dir string
}

// NewSuite starts (or reuses, see KubeconfigEnv) the control plane, applies
// deploy/ server-side, mints the daemon's kubeconfig and builds the helpers.
// It must run as root.
func NewSuite(ctx context.Context) (*Suite, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("e2e tests create network namespaces and must run as root")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "switchyard-e2e-")
	if err != nil {
		return nil, fmt.Errorf("suite dir: %w", err)
	}
	s := &Suite{Root: root, Bins: NewBuilder(root, filepath.Join(dir, "bin")), dir: dir}
	if err := s.init(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *Suite) init(ctx context.Context) error {
	var err error
	if s.EchoServerBin, err = s.Bins.Binary(ctx, EchoServerPkg, EchoServerBinEnv); err != nil {
		return err
	}
	if s.NSForwardBin, err = s.Bins.Binary(ctx, NSForwardPkg, NSForwardBinEnv); err != nil {
		return err
	}
	if s.Cluster, err = ClusterFromEnv(ctx, s.Root); err != nil {
		return err
	}
	objs, err := ReadManifests(filepath.Join(s.Root, "deploy"))
	if err != nil {
		return err
	}
	if err := ApplyManifests(ctx, s.Cluster.Config, objs); err != nil {
		return err
	}
	s.DaemonKubeconfig = filepath.Join(s.dir, "switchyard.kubeconfig")
	return s.Cluster.ServiceAccountKubeconfig(ctx, DaemonSANamespace, DaemonSAName, s.DaemonKubeconfig, daemonTokenTTL)
}

// DaemonBinary returns the switchyard binary, building ./cmd/switchyard on
// first use unless $SWITCHYARD_BIN names one.
func (s *Suite) DaemonBinary(ctx context.Context) (string, error) {
	return s.Bins.Binary(ctx, DaemonPkg, DaemonBinEnv)
}

// Close stops a control plane the suite started and removes its files.
func (s *Suite) Close() error {
	var err error
	if s.Cluster != nil {
		err = s.Cluster.Stop()
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}
