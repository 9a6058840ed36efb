// Command switchyard is a kube-proxy replacement: it watches Services and
// EndpointSlices and programs this node's dataplane.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/cmd/switchyard/app"
)

func main() {
	os.Exit(run())
}

// run executes the command and returns the process exit code: 0 on success,
// 1 with the error logged otherwise (app.ReportError).
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		// After the first signal, restore default handling so a second
		// SIGINT/SIGTERM terminates a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	defer klog.Flush()

	cmd := app.NewCommand(app.Run)
	if err := cmd.ExecuteContext(ctx); err != nil {
		app.ReportError(err, os.Args[1:], os.Stderr)
		return 1
	}
	return 0
}
