package framework

import "testing"

func TestParseEchoReply(t *testing.T) {
	tests := []struct {
		line    string
		want    EchoReply
		wantIP  string
		wantErr bool
	}{
		{line: "pod0 10.244.0.1:41234\n", want: EchoReply{Name: "pod0", Source: "10.244.0.1:41234"}, wantIP: "10.244.0.1"},
		{line: "pod-b [fd00::1]:80", want: EchoReply{Name: "pod-b", Source: "[fd00::1]:80"}, wantIP: "fd00::1"},
		{line: "pod0\n", wantErr: true},
		{line: "pod0 10.244.0.1\n", wantErr: true},
		{line: "a b c\n", wantErr: true},
		{line: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseEchoReply(tc.line)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseEchoReply(%q) error = %v, wantErr %v", tc.line, err, tc.wantErr)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseEchoReply(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
		if !tc.wantErr && got.SourceIP() != tc.wantIP {
			t.Errorf("SourceIP of %q = %q, want %q", tc.line, got.SourceIP(), tc.wantIP)
		}
	}
}
