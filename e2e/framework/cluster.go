package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigEnv names an existing cluster's admin kubeconfig to reuse instead
// of starting a private control plane.
const KubeconfigEnv = "SWITCHYARD_KUBECONFIG"

// Cluster is a kube-apiserver the tests talk to with admin rights.
type Cluster struct {
	Kubeconfig string // admin kubeconfig path
	Config     *rest.Config
	Client     kubernetes.Interface
	// APIAddr is the apiserver's loopback host:port; nsforward exposes the
	// same address inside a node namespace so kubeconfigs work unchanged.
	APIAddr string
	RunDir  string
	// EtcdEndpoint is the client URL of the apiserver's etcd: the one
	// StartCluster started, or $SWITCHYARD_ETCD_ENDPOINT for a reused
	// cluster (empty if unknown). See Etcd.
	EtcdEndpoint string

	stop func() error // nil for a cluster this process did not start
}

// ClusterFromEnv connects to $SWITCHYARD_KUBECONFIG if set, and otherwise
// starts a private control plane with hack/local-up.sh on free ports.
func ClusterFromEnv(ctx context.Context, root string) (*Cluster, error) {
	if kc := os.Getenv(KubeconfigEnv); kc != "" {
		return ConnectCluster(kc)
	}
	return StartCluster(ctx, root)
}

// ConnectCluster uses an existing apiserver, which Stop leaves running. Its
// server must be a loopback address.
func ConnectCluster(kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	addr, err := loopbackHostPort(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	return &Cluster{Kubeconfig: kubeconfig, Config: cfg, Client: cs, APIAddr: addr, EtcdEndpoint: os.Getenv(EtcdEndpointEnv)}, nil
}

// StartCluster runs `hack/local-up.sh up` with a fresh RUN_DIR, free ports
// and the dual-stack DefaultServiceCIDRs (so tests of every Shape can
// create their Services). Stop runs `down` and removes the directory.
func StartCluster(ctx context.Context, root string) (*Cluster, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	runDir, err := os.MkdirTemp("", "switchyard-e2e-cluster-")
	if err != nil {
		return nil, fmt.Errorf("cluster run dir: %w", err)
	}
	env := append(os.Environ(), "RUN_DIR="+runDir, "SERVICE_CIDR="+DefaultServiceCIDRs,
		"APISERVER_PORT="+strconv.Itoa(ports[0]),
		"ETCD_PORT="+strconv.Itoa(ports[1]),
		"ETCD_PEER_PORT="+strconv.Itoa(ports[2]))
	script := filepath.Join(root, "hack", "local-up.sh")
	stop := func() error {
		err := localUp(context.Background(), script, env, "down")
		return errors.Join(err, os.RemoveAll(runDir))
	}
	if err := localUp(ctx, script, env, "up"); err != nil {
		return nil, errors.Join(err, stop())
	}
	c, err := ConnectCluster(filepath.Join(runDir, "admin.kubeconfig"))
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	c.RunDir, c.stop = runDir, stop
	c.EtcdEndpoint = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	return c, nil
}

func localUp(ctx context.Context, script string, env []string, verb string) error {
	cmd := exec.CommandContext(ctx, script, verb)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", script, verb, err, out)
	}
	return nil
}

// Stop shuts down a control plane StartCluster started; for a reused cluster
// it does nothing.
func (c *Cluster) Stop() error {
	if c.stop == nil {
		return nil
	}
	return c.stop()
}

// loopbackHostPort extracts host:port from an https URL with a loopback IP.
func loopbackHostPort(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("parse server %q: %w", server, err)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() || u.Port() == "" {
		return "", fmt.Errorf("server %q is not a loopback IP:port; nsforward cannot expose it in a namespace", server)
	}
	return u.Host, nil
}
