package hollow

import (
	"strconv"
	"strings"
	"time"
)

// syncLine is one `switchyard hollow` sync report ("hollow-sync ...").
type syncLine struct {
	Node  string
	At    time.Time
	Full  bool
	Names []string
}

// parseSyncLine reads a "hollow-sync" line; ok is false for any other line
// or a malformed one.
func parseSyncLine(line string) (s syncLine, ok bool) {
	rest, found := strings.CutPrefix(line, "hollow-sync ")
	if !found {
		return syncLine{}, false
	}
	var haveNode, haveAt bool
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "node":
			s.Node, haveNode = v, v != ""
		case "at":
			ns, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return syncLine{}, false
			}
			s.At, haveAt = time.Unix(0, ns), true
		case "full":
			s.Full = v == "true"
		case "names":
			s.Names = strings.Split(v, ",")
		}
	}
	return s, haveNode && haveAt
}

// readyLine tells the "hollow-ready" line, printed once every hollow node
// of the process has synced.
func readyLine(line string) bool { return strings.HasPrefix(line, "hollow-ready ") }

// The lines of upstream's proxy config handlers (pkg/proxy/config) that
// kubemark's hollow proxy logs at -v=4: an EndpointSlice added (named),
// and the two initial lists handed over.
const (
	sliceAddMsg     = `"Calling handler.OnEndpointSliceAdd" endpoints="`
	slicesSyncedMsg = `"Calling handler.OnEndpointSlicesSynced()"`
	servicesSynced  = `"Calling handler.OnServiceSynced()"`
)

// kubemarkSliceAdd reads a kubemark log line that reports an EndpointSlice
// handed to the proxier: the slice ("ns/name") and the line's time. now
// supplies the year and location klog's header omits.
func kubemarkSliceAdd(line string, now time.Time) (slice string, at time.Time, ok bool) {
	i := strings.Index(line, sliceAddMsg)
	if i < 0 {
		return "", time.Time{}, false
	}
	slice, _, found := strings.Cut(line[i+len(sliceAddMsg):], `"`)
	if !found || slice == "" {
		return "", time.Time{}, false
	}
	at, ok = klogTime(line, now)
	return slice, at, ok
}

// kubemarkSynced tells which initial list a kubemark line reports handed
// over: "slices", "services" or "".
func kubemarkSynced(line string) string {
	switch {
	case strings.Contains(line, slicesSyncedMsg):
		return "slices"
	case strings.Contains(line, servicesSynced):
		return "services"
	}
	return ""
}

// klogTime is the time of a klog text line ("I1129 08:05:55.896632 ...",
// microseconds), in now's year and location; a line stamped in a month
// after now's belongs to the year before.
func klogTime(line string, now time.Time) (time.Time, bool) {
	if len(line) < 21 || !strings.ContainsRune("IWEF", rune(line[0])) {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], now.Location())
	if err != nil {
		return time.Time{}, false
	}
	y := now.Year()
	if t.Month() > now.Month() {
		y--
	}
	return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), now.Location()), true
}
