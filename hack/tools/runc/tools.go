//go:build tools

// Package tools pins runc, the OCI runtime containerd starts the local node's
// containers with.
package tools

import _ "github.com/opencontainers/runc"
