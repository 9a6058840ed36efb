package framework

import "testing"

func TestLastFlagValue(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{args: nil, want: "def"},
		{args: []string{"--healthz-bind-address=127.0.0.1:1"}, want: "127.0.0.1:1"},
		{args: []string{"--healthz-bind-address=127.0.0.1:1", "--healthz-bind-address", "127.0.0.1:2"}, want: "127.0.0.1:2"},
		{args: []string{"-healthz-bind-address=127.0.0.1:3"}, want: "127.0.0.1:3"},
		{args: []string{"--healthz-bind-address-extra=x", "--metrics-bind-address=y"}, want: "def"},
		{args: []string{"--healthz-bind-address"}, want: "def"},
	}
	for _, tc := range tests {
		if got := lastFlagValue(tc.args, "healthz-bind-address", "def"); got != tc.want {
			t.Errorf("lastFlagValue(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestDefaultDaemonArgsAreOverridable(t *testing.T) {
	args := append(DefaultDaemonArgs("/k", "n1"), "--metrics-bind-address=127.0.0.1:20249")
	if got := lastFlagValue(args, "metrics-bind-address", ""); got != "127.0.0.1:20249" {
		t.Errorf("metrics address = %q, want the caller's override", got)
	}
	if got := lastFlagValue(args, "hostname-override", ""); got != "n1" {
		t.Errorf("hostname-override = %q, want n1", got)
	}
}
