package app

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as in kube-proxy
)

// addLoggingFlags registers kube-proxy's logging flags (component-base's:
// --logging-format, -v, --vmodule, --log-flush-frequency and the split
// stream and buffer options). Their values are only read back through the
// flag set (mergeLogging), so the configuration they bind to is scratch.
func addLoggingFlags(fs *pflag.FlagSet) {
	logsapi.AddFlags(logsapi.NewLoggingConfiguration(), fs)
}

// mergeLogging is the logging configuration the daemon runs with: the
// file's logging section (defaulted) or the defaults, with every logging
// flag given on the command line applied on top (a flag wins, as for every
// other setting and as kube-proxy does for logging).
func mergeLogging(file *logsapi.LoggingConfiguration, fs *pflag.FlagSet) (*logsapi.LoggingConfiguration, error) {
	c := logsapi.NewLoggingConfiguration()
	if file != nil {
		c = file.DeepCopy()
		logsapi.SetRecommendedLoggingConfiguration(c)
	}
	saved := c.DeepCopy()
	scratch := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(c, scratch) // binds to c, resetting some fields to flag defaults
	*c = *saved
	var err error
	scratch.VisitAll(func(f *pflag.Flag) {
		given := fs.Lookup(f.Name)
		if err != nil || given == nil || !given.Changed {
			return
		}
		if setErr := f.Value.Set(given.Value.String()); setErr != nil {
			err = fmt.Errorf("--%s: %w", f.Name, setErr)
		}
	})
	return c, err
}

// validateLogging checks the configuration as kube-proxy does (format
// known, options allowed by the logging feature gates).
func validateLogging(c *logsapi.LoggingConfiguration, fg featuregate.FeatureGate) error {
	if errs := logsapi.Validate(c, fg, field.NewPath("logging")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// applyLogging switches klog to the configuration (format, verbosity,
// streams). It may run once per process: call it from the daemon's entry
// point only.
func applyLogging(o *Options) error {
	return logsapi.ValidateAndApply(o.Logging, o.FeatureGates)
}
