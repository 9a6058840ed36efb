//go:build tools

// Package tools pins Helm, which `make test` uses to lint and render
// switchyard's chart (deploy/helm/switchyard) and the node smoke test to
// install and upgrade it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
