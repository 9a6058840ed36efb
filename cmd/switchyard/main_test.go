package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets a test run the daemon's main in a child process: the
// logging format is applied once per process.
func TestMain(m *testing.M) {
	if os.Getenv("SWITCHYARD_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"switchyard"}, strings.Fields(os.Getenv("SWITCHYARD_TEST_ARGS"))...)
		os.Exit(run())
	}
	os.Exit(m.Run())
}

// runMain runs main with args and returns its exit code and stderr. Every
// case fails before the daemon touches the kernel or the network (no API
// client can be built, or the configuration is refused).
func runMain(t *testing.T, args string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SWITCHYARD_TEST_RUN_MAIN=1", "SWITCHYARD_TEST_ARGS="+args)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

// TestJSONLoggingEveryLine: with --logging-format=json every line the
// daemon writes on its way out is a JSON object, the fatal error included
// (kube-proxy's "Error running ProxyServer" with the error in "err"),
// whether it stops on a bad flag, a bad value, an unreadable config file
// or no API client; configuration warnings are JSON too.
func TestJSONLoggingEveryLine(t *testing.T) {
	for _, c := range []struct{ args, wantErr, wantWarn string }{
		{"--kubeconfig=/nonexistent --oom-score-adj=0", "building API client configuration", ""},
		{"--config=/nonexistent", "reading config file", ""},
		{"--proxy-mode=bogus", `invalid --proxy-mode "bogus"`, ""},
		{"--bogus-flag", "unknown flag: --bogus-flag", ""},
		{"--ipvs-scheduler=rr --kubeconfig=/nonexistent --oom-score-adj=0", "building API client configuration", "--ipvs-scheduler has no effect in iptables mode"},
	} {
		code, stderr := runMain(t, "--logging-format=json "+c.args)
		if code != 1 {
			t.Errorf("%s: exit code %d, want 1", c.args, code)
		}
		var gotErr, gotWarn bool
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Errorf("%s: a line that is not JSON: %q", c.args, line)
				continue
			}
			if m["msg"] == "Error running ProxyServer" && strings.Contains(m["err"].(string), c.wantErr) {
				gotErr = true
			}
			if c.wantWarn != "" && m["msg"] == c.wantWarn {
				gotWarn = true
			}
		}
		if !gotErr {
			t.Errorf("%s: no JSON error naming %q in:\n%s", c.args, c.wantErr, stderr)
		}
		if c.wantWarn != "" && !gotWarn {
			t.Errorf("%s: no JSON warning %q in:\n%s", c.args, c.wantWarn, stderr)
		}
	}
}

// TestTextLoggingError: in the default text format the fatal error is a
// klog line carrying the error; explain's errors stay plain lines.
func TestTextLoggingError(t *testing.T) {
	code, stderr := runMain(t, "--proxy-mode=bogus")
	if code != 1 || !strings.HasPrefix(stderr, "E") || !strings.Contains(stderr, `"Error running ProxyServer" err="invalid --proxy-mode`) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	code, stderr = runMain(t, "explain --logging-format=json --kubeconfig=/nonexistent default/web")
	if code != 1 || !strings.HasPrefix(stderr, "switchyard: building API client configuration") {
		t.Errorf("explain: exit %d, stderr:\n%s", code, stderr)
	}
}
