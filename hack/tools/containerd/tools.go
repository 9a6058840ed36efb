//go:build tools

// Package tools pins containerd 2.x and its runc shim for the local node of
// hack/cluster (Debian's containerd 1.6 is end-of-life and kubelet 1.37 does
// not support it).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
