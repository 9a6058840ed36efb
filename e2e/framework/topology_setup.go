package framework

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// setupTimeout bounds building or tearing down one topology.
const setupTimeout = 2 * time.Minute

// NewTopology builds the namespaces of spec (with a fresh random ID if
// spec.ID is empty) and deletes them in t.Cleanup, also when setup fails
// half-way or the test fails.
func NewTopology(t testing.TB, spec TopologySpec) *Topology {
	t.Helper()
	if spec.ID == "" {
		id, err := freeTopologyID()
		if err != nil {
			t.Fatal(err)
		}
		spec.ID = id
	}
	topo, err := NewTopologyPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Teardown(); err != nil {
			t.Errorf("teardown of topology %s: %v", topo.ID, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	for _, argv := range topo.SetupCommands() {
		if err := runCommand(ctx, argv); err != nil {
			t.Fatalf("build topology %s: %v", topo.ID, err)
		}
	}
	for _, f := range topo.Families() {
		v := topo.For(f)
		t.Logf("topology %s %s: node %s (%s, bridge %s), client %s (%s), pods %v",
			topo.ID, f, v.NodeNS, v.NodeIP, v.BridgeIP, v.ClientNS, v.ClientIP, v.PodIPs())
	}
	return topo
}

// freeTopologyID picks "syNNNN" such that no namespace with that prefix
// exists yet.
func freeTopologyID() (string, error) {
	for range 100 {
		id := fmt.Sprintf("sy%04d", rand.IntN(10000))
		if _, err := os.Stat(NetnsPath(id + "-node")); errors.Is(err, os.ErrNotExist) {
			return id, nil
		}
	}
	return "", fmt.Errorf("no free topology id after 100 tries")
}

// Teardown deletes every namespace of the topology that still exists. Run it
// after the processes inside were stopped: a namespace with live processes
// only disappears when they exit.
func (t *Topology) Teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	var errs []error
	for _, argv := range t.TeardownCommands() {
		ns := argv[len(argv)-1]
		if _, err := os.Stat(NetnsPath(ns)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := runCommand(ctx, argv); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
