//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// suiteSetupTimeout allows for a cold build of the control-plane tools.
const suiteSetupTimeout = 20 * time.Minute

// suite is shared by every test of the run; TestMain owns its lifetime.
var suite *framework.Suite

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), suiteSetupTimeout)
	s, err := framework.NewSuite(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e suite setup:", err)
		return 1
	}
	suite = s
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e suite teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
