package kerneltest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNetCounters(t *testing.T) {
	out := NetCounters{}
	text := "TcpExt: SyncookiesSent PAWSTimewait\nTcpExt: 0 17\nTcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 42\n"
	if err := parseNetCounters(text, out); err != nil {
		t.Fatal(err)
	}
	want := NetCounters{"TcpExtSyncookiesSent": 0, "TcpExtPAWSTimewait": 17, "TcpRtoAlgorithm": 1, "TcpMaxConn": -1, "TcpRetransSegs": 42}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff(NetCounters{"TcpExtPAWSTimewait": 5}, NetCounters{"TcpExtPAWSTimewait": 22}.Sub(NetCounters{"TcpExtPAWSTimewait": 17})); d != "" {
		t.Errorf("Sub (-want +got):\n%s", d)
	}
	for _, bad := range []string{"TcpExt: A B\n", "TcpExt: A B\nTcpExt: 1\n", "TcpExt: A\nTcp: 1\n", "TcpExt: A\nTcpExt: x\n"} {
		if err := parseNetCounters(bad, NetCounters{}); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}
