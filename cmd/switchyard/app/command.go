package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Version is the daemon's version, printed by --version. Release builds set
// it with -ldflags "-X github.com/switchyard-proxy/switchyard/cmd/switchyard/app.Version=v1.2.3".
var Version = "dev"

// NewCommand returns the switchyard root command. Executing it parses flags
// and the optional --config file, validates everything, then calls run with
// the resulting Options; run's error is returned unchanged. Its subcommands
// explain (runExplain) and hollow (runHollow) take the same flags.
func NewCommand(run func(context.Context, *Options) error) *cobra.Command {
	withLogging := func(ctx context.Context, o *Options) error {
		if err := applyLogging(o); err != nil {
			return fmt.Errorf("logging: %w", err)
		}
		return run(ctx, o)
	}
	warn := warnLater
	cmd := newCommand(withLogging, warn)
	cmd.AddCommand(newExplainCommand(func(ctx context.Context, o *Options, req *explainRequest) error {
		if err := applyLogging(o); err != nil {
			return fmt.Errorf("logging: %w", err)
		}
		return runExplain(ctx, o, req)
	}, warn))
	cmd.AddCommand(newHollowCommand(func(ctx context.Context, o *Options, req *hollowRequest) error {
		if err := applyLogging(o); err != nil {
			return fmt.Errorf("logging: %w", err)
		}
		return runHollow(ctx, o, req)
	}, warn))
	return cmd
}

// newCommand is NewCommand with the warning sink injected (tests record it).
func newCommand(run func(context.Context, *Options) error, warn func(string)) *cobra.Command {
	flags := defaultRawConfig()
	cmd := &cobra.Command{
		Use:   "switchyard",
		Short: "switchyard is a drop-in replacement for kube-proxy",
		Long: `switchyard runs on every node and programs the node's dataplane
(iptables, IPVS or a userspace proxy) so that traffic to a Service's virtual
IPs and ports reaches one of its endpoints. It takes kube-proxy's flags and
its KubeProxyConfiguration file (--config).`,
		Version:       Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, merged, err := complete(cmd.Flags(), flags, warn)
			if err != nil {
				return err
			}
			if flags.WriteConfigTo != "" {
				return writeConfigTo(flags.WriteConfigTo, merged, cmd.Flags())
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetVersionTemplate("switchyard {{.Version}}\n")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	fs := cmd.Flags()
	fs.SortFlags = false
	flags.addFlags(fs)
	addLoggingFlags(fs)
	return cmd
}

// complete merges defaults, the config file and the flags given on the
// command line, then validates the result.
func complete(fs *pflag.FlagSet, flags *rawConfig, warn func(string)) (*Options, *rawConfig, error) {
	merged := defaultRawConfig()
	if flags.ConfigFile != "" {
		cfg, err := loadConfigFile(flags.ConfigFile, warn)
		if err != nil {
			return nil, nil, err
		}
		merged.applyFile(cfg)
	}
	merged.applyChangedFlags(fs, flags)
	opts, err := merged.options()
	if err != nil {
		return nil, nil, err
	}
	if merged.Logging, err = mergeLogging(merged.Logging, fs); err != nil {
		return nil, nil, err
	}
	if err := validateLogging(merged.Logging, opts.FeatureGates); err != nil {
		return nil, nil, err
	}
	opts.Logging = merged.Logging
	warnInactive(merged, fs, opts.Mode, warn)
	warnInactiveDetectLocal(merged, fs, opts.LocalDetector.Mode, warn)
	return opts, merged, nil
}

// warnInactive reports settings given explicitly (flag or file) that the
// selected mode does not use. Upstream accepts them silently; they stay
// accepted here, but the operator hears about it.
func warnInactive(r *rawConfig, fs *pflag.FlagSet, mode Mode, warn func(string)) {
	for _, s := range settings() {
		explicit := fs.Changed(s.flag) || r.fromFile[s.flag]
		if !explicit {
			continue
		}
		if owner := flagOwner(s.flag); owner != "" && owner != mode {
			warn(fmt.Sprintf("%s has no effect in %s mode", r.name(s.flag), mode))
		}
	}
}

// warnInactiveDetectLocal reports a bridge name or interface prefix given
// explicitly while detectLocalMode is another mode: kube-proxy ignores it
// silently; here it is ignored too, and said. (kubeadm writes both as
// empty strings, which is not "given".)
func warnInactiveDetectLocal(r *rawConfig, fs *pflag.FlagSet, mode proxier.LocalMode, warn func(string)) {
	for _, s := range []struct {
		flag, value string
		mode        proxier.LocalMode
	}{
		{"pod-bridge-interface", r.PodBridgeInterface, proxier.LocalModeBridgeInterface},
		{"pod-interface-name-prefix", r.PodInterfaceNamePrefix, proxier.LocalModeInterfaceNamePrefix},
	} {
		if s.value != "" && mode != s.mode && (fs.Changed(s.flag) || r.fromFile[s.flag]) {
			warn(fmt.Sprintf("%s has no effect: %s is %s, not %s", r.name(s.flag), r.name("detect-local-mode"), mode, s.mode))
		}
	}
}
