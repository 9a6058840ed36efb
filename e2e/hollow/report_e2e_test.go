//go:build e2e

package hollow

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// projectTo is the node count the fits are projected to.
const projectTo = 5000

// report prints the table, the projection and one line per proxy (on
// stdout, so `make hollow` ends with them).
func report(t *testing.T, cfg config, rs []result) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d services x %d endpoints, %d endpoint changes per run\n\n", cfg.services, cfg.endpoints, cfg.changes)
	writeTable(&b, rs, quietWindow)
	fmt.Fprintf(&b, "\nleast-squares fits over N, projected to %d nodes:\n\n", projectTo)
	writeProjection(&b, rs, cfg.proxies, projectTo, quietWindow)
	b.WriteString("\n")
	for _, r := range largest(rs, cfg.proxies) {
		if r.missed > 0 {
			t.Errorf("%s n=%d: %d (change, proxy) pairs never seen", r.proxy, r.n, r.missed)
		}
		b.WriteString(resultLine(r) + "\n")
	}
	fmt.Fprint(os.Stdout, b.String())
}
