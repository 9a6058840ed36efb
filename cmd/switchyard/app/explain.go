package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/explain"
)

// explainRequest is what `switchyard explain` was asked.
type explainRequest struct {
	// Service and port: namespace/name[:port] (port name or number).
	Namespace, Name, Port string
	// Trace: trace one packet instead (--trace SRC DST:PORT/PROTO).
	Trace       bool
	Src         netip.Addr
	Dst         netip.AddrPort
	Protocol    v1.Protocol
	InInterface string
	Verbose     bool
	Out         io.Writer
}

// explainFunc runs a parsed explain request with the daemon's options.
type explainFunc func(ctx context.Context, o *Options, req *explainRequest) error

// newExplainCommand is `switchyard explain`. It takes every daemon flag
// and the --config file, merged and validated as the daemon does, so it
// reads the API and the kernel the way the daemon on this node does.
func newExplainCommand(run explainFunc, warn func(string)) *cobra.Command {
	flags := defaultRawConfig()
	req := &explainRequest{}
	cmd := &cobra.Command{
		Use:   "explain NAMESPACE/NAME[:PORT] | explain --trace SRC DST:PORT/PROTO",
		Short: "Show what this node's kernel does with a Service's traffic, next to what the API says",
		Long: `explain reads a Service and its EndpointSlices from the API (as the daemon does:
--kubeconfig, --master or in-cluster) and this node's live rules of the active mode
(--proxy-mode or the --config file), traces a new connection to each address of the
Service through them, and prints the endpoints each reaches with their
probabilities, the policies and affinity, and what the kernel misses or holds in
excess. It never changes the kernel. Exit status 1 when something differs or fails.

With --trace it follows one packet from SRC to DST:PORT/PROTO (tcp, udp, sctp)
through the live rules and prints every path, rule by rule.`,
		Args:          cobra.RangeArgs(1, 2),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := req.parse(args); err != nil {
				return err
			}
			opts, _, err := complete(cmd.Flags(), flags, warn)
			if err != nil {
				return err
			}
			if opts.Cleanup || opts.CleanupAfterRollback || opts.InitOnly || flags.WriteConfigTo != "" {
				return errors.New("explain only reads: --cleanup, --cleanup-after-rollback, --init-only and --write-config-to do not apply")
			}
			req.Out = cmd.OutOrStdout()
			return run(cmd.Context(), opts, req)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.BoolVar(&req.Trace, "trace", false, "trace one packet: explain --trace SRC DST:PORT/PROTO")
	fs.StringVar(&req.InInterface, "in-interface", "", "with --trace: the interface the packet arrives on (default: the route to SRC; none when SRC is this node's)")
	fs.BoolVar(&req.Verbose, "verbose", false, "print the rules every traced path matched")
	flags.addFlags(fs)
	addLoggingFlags(fs)
	return cmd
}

// parse reads the positional arguments.
func (r *explainRequest) parse(args []string) error {
	if r.Trace {
		if len(args) != 2 {
			return errors.New("--trace takes SRC DST:PORT/PROTO")
		}
		return r.parseTrace(args[0], args[1])
	}
	if len(args) != 1 {
		return errors.New("explain takes NAMESPACE/NAME[:PORT]")
	}
	return r.parseService(args[0])
}

func (r *explainRequest) parseService(arg string) error {
	nsName, port, _ := strings.Cut(arg, ":")
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q: want NAMESPACE/NAME[:PORT]", arg)
	}
	r.Namespace, r.Name, r.Port = ns, name, port
	return nil
}

func (r *explainRequest) parseTrace(src, dst string) error {
	var err error
	if r.Src, err = netip.ParseAddr(src); err != nil {
		return fmt.Errorf("source %q: %w", src, err)
	}
	addr, proto, ok := strings.Cut(dst, "/")
	if !ok {
		return fmt.Errorf("destination %q: want DST:PORT/PROTO", dst)
	}
	if r.Dst, err = netip.ParseAddrPort(addr); err != nil {
		return fmt.Errorf("destination %q: %w", dst, err)
	}
	r.Protocol = v1.Protocol(strings.ToUpper(proto))
	if !slices.Contains([]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}, r.Protocol) {
		return fmt.Errorf("protocol %q: want tcp, udp or sctp", proto)
	}
	if r.Src.Unmap().Is4() != r.Dst.Addr().Unmap().Is4() {
		return errors.New("source and destination are of different IP families")
	}
	r.Src, r.Dst = r.Src.Unmap(), netip.AddrPortFrom(r.Dst.Addr().Unmap(), r.Dst.Port())
	return nil
}

// selectPort keeps the report's service ports named by port (a name or a
// number); all of them when port is empty.
func selectPort(rep *explain.Report, port string) error {
	if port == "" {
		return nil
	}
	num, _ := strconv.Atoi(port)
	var kept []explain.PortReport
	for _, p := range rep.Ports {
		sp := p.Expected.Port
		if sp.Name.Port == port || (num > 0 && int(sp.Port) == num) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return fmt.Errorf("service %s has no port %q", rep.Service.Service.Name, port)
	}
	rep.Ports = kept
	return nil
}

// explainFamilies are the families the daemon programs here, decided
// without its iptables probe (which could create a legacy table): the
// node's primary family, and the other one when the kernel has IPv6.
func explainFamilies(o *Options, nodeIPs []netip.Addr) []v1.IPFamily {
	primary := detectPrimaryFamily(nodeIPs, o.BindAddress)
	fams := []v1.IPFamily{primary}
	if (&realProbe{}).KernelIPv6() == nil {
		fams = append(fams, otherFamily(primary))
	}
	return fams
}
