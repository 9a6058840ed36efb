package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	klog.InitFlags(nil)
	nsFlag := flag.String("netns", "", "target network namespace: a name under /run/netns or a path")
	listen := flag.String("listen", "127.0.0.1:6443", "address to listen on inside the target namespace")
	target := flag.String("target", "127.0.0.1:6443", "address to dial from nsforward's own namespace")
	reverse := flag.Bool("reverse", false, "the other way round: listen in nsforward's own namespace and dial -target inside -netns")
	flag.Parse()
	if *nsFlag == "" {
		fmt.Fprintln(os.Stderr, "nsforward: -netns is required")
		os.Exit(2)
	}
	runFn := run
	if *reverse {
		runFn = runReverse
	}
	if err := runFn(netnsPath(*nsFlag), *listen, *target); err != nil {
		fmt.Fprintln(os.Stderr, "nsforward:", err)
		os.Exit(1)
	}
}

func run(nsPath, listen, target string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ln, err := listenInNetns(nsPath, listen)
	if err != nil {
		return err
	}
	fmt.Printf("listening on %s in %s, forwarding to %s\n", ln.Addr(), nsPath, target)
	var d net.Dialer
	f := &forwarder{target: target, dial: d.DialContext}
	return f.serve(ctx, ln)
}

// runReverse listens on listen in nsforward's own namespace and dials target
// inside nsPath: it makes an address of the namespace (a control plane inside
// hack/cluster's network, say) reachable from the host.
func runReverse(nsPath, listen, target string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Printf("listening on %s, forwarding to %s in %s\n", ln.Addr(), target, nsPath)
	f := &forwarder{target: target, dial: dialInNetns(nsPath)}
	return f.serve(ctx, ln)
}
