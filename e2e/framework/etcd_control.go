package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// etcdPidFile is where hack/local-up.sh records etcd.
const etcdPidFile = "etcd.pid"

// KilledEtcd is an etcd KillEtcd killed; Start runs it again on the same
// data directory with the same command line.
type KilledEtcd struct {
	c    *Cluster
	argv []string
}

// KillEtcd kills the etcd of a cluster StartCluster started with SIGKILL
// (a crash: the kube-apiserver keeps running and loses its etcd watches
// mid-stream), after recording its command line. It signals only the PID
// local-up.sh recorded, and only if that PID is still the process it
// started.
func (c *Cluster) KillEtcd() (*KilledEtcd, error) {
	pid, argv, err := c.recordedCommand(etcdPidFile)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("SIGKILL etcd %d: %w", pid, err)
	}
	err = WaitFor(10*time.Second, func() (bool, error) {
		_, err := procStat(pid)
		return err != nil || isZombie(pid), nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %d did not exit after SIGKILL: %w", pid, err)
	}
	return &KilledEtcd{c: c, argv: argv}, nil
}

// Start runs etcd again, records it for local-up.sh's `down` and waits
// until its /health says so.
func (k *KilledEtcd) Start(ctx context.Context) error {
	p, err := k.c.restart("etcd", etcdPidFile, k.argv)
	if err != nil {
		return err
	}
	return WaitFor(60*time.Second, func() (bool, error) {
		if err := exitError(p); err != nil {
			return false, err
		}
		return etcdHealthy(ctx, k.c.EtcdEndpoint)
	})
}

// etcdHealthy asks etcd's /health endpoint.
func etcdHealthy(ctx context.Context, endpoint string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return false, fmt.Errorf("etcd /health: %w", err)
	}
	return resp.StatusCode == http.StatusOK && h.Health == "true", nil
}
