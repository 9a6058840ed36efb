package app

import (
	"fmt"
	"io"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as in kube-proxy
	"k8s.io/klog/v2"
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

// logState is the process's logging: whether klog has been switched to
// the configured format yet, and the warnings written before it was
// (configuration checks run before the format is known; in JSON mode a
// text line would break the operator's log pipeline).
var logState struct {
	sync.Mutex
	applied bool
	pending []string
}

// applyLogging switches klog to the configuration (format, verbosity,
// streams) and writes the warnings held until then. It may run once per
// process: call it from the daemon's entry point only.
func applyLogging(o *Options) error {
	logState.Lock()
	defer logState.Unlock()
	if err := logsapi.ValidateAndApply(o.Logging, o.FeatureGates); err != nil {
		return err
	}
	logState.applied = true
	for _, msg := range logState.pending {
		klog.Warning(msg)
	}
	logState.pending = nil
	return nil
}

// warnLater is the daemon's warning sink before logging is applied: it
// holds the warning until the format is known.
func warnLater(msg string) {
	logState.Lock()
	defer logState.Unlock()
	if logState.applied {
		klog.Warning(msg)
		return
	}
	logState.pending = append(logState.pending, msg)
}

// ReportError writes the error that ends the process, as kube-proxy does:
// once logging is applied, as a log line in the configured format
// ("Error running ProxyServer", JSON with --logging-format=json). When the
// command failed before that (a bad flag, an unreadable config file), the
// logging flags on the command line are applied on their own, so a JSON
// run still writes JSON; when even those are unusable, it falls back to
// a plain line on stderr, as `switchyard explain` always does. Warnings
// held until then are written first.
func ReportError(err error, args []string, stderr io.Writer) {
	logState.Lock()
	applied := logState.applied
	logState.Unlock()
	explain := len(args) > 0 && args[0] == "explain" // a command's report, not a log
	if explain || (!applied && applyLoggingFlags(args) != nil) {
		fmt.Fprintf(stderr, "switchyard: %v\n", err)
		return
	}
	klog.ErrorS(err, "Error running ProxyServer")
	klog.Flush()
}

// applyLoggingFlags applies the logging flags found in args (anything
// else on the command line is ignored) with the default feature gates.
func applyLoggingFlags(args []string) error {
	fs := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	fs.ParseErrorsWhitelist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	addLoggingFlags(fs)
	_ = fs.Parse(args) // a malformed logging flag keeps its default
	c, err := mergeLogging(nil, fs)
	if err != nil {
		return err
	}
	fg, err := newFeatureGate(nil)
	if err != nil {
		return err
	}
	return applyLogging(&Options{Logging: c, FeatureGates: fg})
}
