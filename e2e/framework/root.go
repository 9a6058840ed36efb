package framework

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath is the Go module of the repository under test.
const modulePath = "github.com/switchyard-proxy/switchyard"

// RepoRoot finds the repository root by walking up from the working directory
// (a test's working directory is its package directory) to the go.mod that
// declares switchyard's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s above the working directory", modulePath)
		}
		dir = parent
	}
}
