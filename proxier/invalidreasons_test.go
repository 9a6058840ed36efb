package proxier

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestInvalidReasonsListed: every invalid("Kind", "reason") of the
// trackers, and every field parseAddrs reports, is in invalidReasons, so
// its series starts at 0.
func TestInvalidReasonsListed(t *testing.T) {
	calls := regexp.MustCompile(`invalid\("([A-Za-z]+)", "([a-z-]+)"\)`)
	addrs := regexp.MustCompile(`parseAddrs\(svc, [^,]+, "([a-z-]+)"`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var pairs [][2]string
		for _, m := range calls.FindAllStringSubmatch(string(src), -1) {
			pairs = append(pairs, [2]string{m[1], m[2]})
		}
		for _, m := range addrs.FindAllStringSubmatch(string(src), -1) {
			pairs = append(pairs, [2]string{"Service", m[1]})
		}
		for _, p := range pairs {
			found++
			if !slices.Contains(invalidReasons, p) {
				t.Errorf("%s: %v is not in invalidReasons", f, p)
			}
		}
	}
	if found < len(invalidReasons) {
		t.Errorf("found %d uses in the sources, fewer than the %d listed: the scan misses some", found, len(invalidReasons))
	}
}
