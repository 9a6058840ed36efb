package ipset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEntryFormatAndParse(t *testing.T) {
	cases := []struct {
		typ, in, want string
		bad           bool
	}{
		{typ: HashIP, in: "10.96.0.10", want: "10.96.0.10"},
		{typ: HashIPPort, in: "10.96.0.10,tcp:80", want: "10.96.0.10,tcp:80"},
		{typ: HashIPPort, in: "fd00:10:96:0::10,udp:53", want: "fd00:10:96::10,udp:53"},
		{typ: HashIPPortIP, in: "10.244.1.2,sctp:8080,10.244.1.2", want: "10.244.1.2,sctp:8080,10.244.1.2"},
		{typ: HashIPPortNet, in: "198.51.100.1,tcp:80,203.0.113.9/24", want: "198.51.100.1,tcp:80,203.0.113.0/24"},
		{typ: HashIPPortNet, in: "198.51.100.1,tcp:80,192.0.2.7/32", want: "198.51.100.1,tcp:80,192.0.2.7"},
		{typ: HashIPPortNet, in: "198.51.100.1,tcp:80,192.0.2.7", want: "198.51.100.1,tcp:80,192.0.2.7"},
		{typ: BitmapPort, in: "30080", want: "30080"},
		{typ: HashIPPort, in: "10.96.0.10,80", bad: true},
		{typ: HashIPPort, in: "10.96.0.10,icmp:80", bad: true},
		{typ: BitmapPort, in: "70000", bad: true},
		{typ: "hash:mac", in: "00:11:22:33:44:55", bad: true},
	}
	for _, c := range cases {
		got, err := Canonical(c.typ, c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%s %q: accepted as %q", c.typ, c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q = %q, %v; want %q", c.typ, c.in, got, err, c.want)
		}
	}
}

func TestParseSave(t *testing.T) {
	// ipset 7.x prints bucketsize and initval; entries are kept canonical.
	saved := `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 1048576 bucketsize 12 initval 0x1c3c5e4f
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
create other hash:mac hashsize 1024
add other 00:11:22:33:44:55
`
	sets, err := ParseSave([]byte(saved))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for name, s := range sets {
		got[name] = []string{s.Type, s.Family}
		for e := range s.Entries {
			got[name] = append(got[name], e)
		}
	}
	want := map[string][]string{
		"KUBE-CLUSTER-IP":    {HashIPPort, FamilyINet, "10.96.0.10,tcp:80"},
		"KUBE-NODE-PORT-TCP": {BitmapPort, "", "30080"},
		"other":              {"hash:mac", "", "00:11:22:33:44:55"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"add NOPE 1.2.3.4\n", "list X\n", "create\n", "add X a b\n", "create KUBE-A-VERY-LONG-NAME-OVER-31-CHARS hash:ip\n"} {
		if _, err := ParseSave([]byte(bad)); err == nil {
			t.Errorf("ParseSave(%q) accepted", bad)
		}
	}
}

func TestParseCommands(t *testing.T) {
	cmds, err := ParseCommands([]byte("# comment\n\ncreate S hash:ip family inet -exist\nadd S 10.0.0.1 -exist\ndel S 10.0.0.2\nflush\ndestroy S\nswap S T\nCOMMIT\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, c.String())
	}
	want := []string{"create S hash:ip family inet -exist", "add S 10.0.0.1 -exist", "del S 10.0.0.2", "flush", "destroy S", "swap S T"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseTerse(t *testing.T) {
	out := `Name: KUBE-CLUSTER-IP
Type: hash:ip,port
Revision: 6
Header: family inet hashsize 1024 maxelem 1048576 bucketsize 12 initval 0x5b3e4a2c
Size in memory: 344
References: 2
Number of entries: 3
Name: KUBE-NODE-PORT-TCP
Type: bitmap:port
Revision: 3
Header: range 0-65535
Size in memory: 8264
References: 1
Number of entries: 0
Name: OLD
Type: hash:ip
`
	got, err := ParseTerse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"KUBE-CLUSTER-IP": 3, "KUBE-NODE-PORT-TCP": 0, "OLD": -1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d", k, got[k], v)
		}
	}
}
