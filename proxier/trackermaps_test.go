package proxier

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestWalkSorted(t *testing.T) {
	pe := func(port string) portEndpoints { return portEndpoints{name: spn("svc", port, v1.ProtocolTCP)} }
	prev := []portEndpoints{pe("a"), pe("c"), pe("d")}
	cur := []portEndpoints{pe("b"), pe("c"), pe("e")}
	var got []string
	walkSorted(prev, cur, func(p *portEndpoints) ServicePortName { return p.name }, func(p, c *portEndpoints) {
		switch {
		case c == nil:
			got = append(got, "-"+p.name.Port)
		case p == nil:
			got = append(got, "+"+c.name.Port)
		default:
			got = append(got, "="+c.name.Port)
		}
	})
	if d := cmp.Diff([]string{"-a", "+b", "=c", "-d", "+e"}, got); d != "" {
		t.Errorf("walk (-want +got):\n%s", d)
	}
}
