package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The kube-apiserver's audit log tells, per client identity, which lists
// and watches it served: whether a client that lost its watches resumed
// them from its last resourceVersion or listed everything again.

// auditPolicy records, at Metadata level, the lists and watches of the
// identities named (one rule each), and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
  users: %s
- level: None
`

// AuditArgs writes an audit policy for the lists and watches of users into
// dir and returns the kube-apiserver flags that log them, as JSON lines, to
// the returned path.
func AuditArgs(dir string, users ...string) (args []string, logPath string, err error) {
	quoted, err := json.Marshal(users)
	if err != nil {
		return nil, "", err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, fmt.Appendf(nil, auditPolicy, quoted), 0o600); err != nil {
		return nil, "", fmt.Errorf("audit policy: %w", err)
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath, "--audit-log-format=json"}, logPath, nil
}

// AuditEvent is what the lists and watches of an audit log tell.
type AuditEvent struct {
	Stage    string // ResponseStarted (a watch established), ResponseComplete
	Verb     string // list, watch
	User     string
	Resource string
	Query    url.Values // the request's query: resourceVersion, watch, sendInitialEvents
	At       time.Time  // requestReceivedTimestamp
	Code     int
}

// auditLine is the part of an audit.k8s.io/v1 Event AuditEvent reads.
type auditLine struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// ReadAudit reads the events of an audit log of JSON lines; a line that is
// not an event (a partial last line) is an error.
func ReadAudit(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		e := AuditEvent{Stage: l.Stage, Verb: l.Verb, User: l.User.Username, At: l.RequestReceived}
		if l.ObjectRef != nil {
			e.Resource = l.ObjectRef.Resource
		}
		if l.ResponseStatus != nil {
			e.Code = l.ResponseStatus.Code
		}
		if u, err := url.Parse(l.RequestURI); err == nil {
			e.Query = u.Query()
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// FullList tells whether e is a complete list the apiserver served: a
// list, or a watch that starts with every object (sendInitialEvents, the
// streaming list of client-go's WatchListClient).
func (e AuditEvent) FullList() bool {
	switch e.Verb {
	case "list":
		return e.Stage == "ResponseComplete" && e.Code == 200
	case "watch":
		return e.Stage == "ResponseStarted" && e.Query.Get("sendInitialEvents") == "true"
	}
	return false
}

// WatchFromLastRV tells whether e is a watch established from a
// resourceVersion the client had (not "" or "0", which start from the
// apiserver's state, and not a streaming list): an attempt to resume. The
// apiserver answers one it cannot serve from its watch cache with 200 and
// then a 410 ERROR event in the stream, which the audit log does not show;
// the client's list that follows does.
func (e AuditEvent) WatchFromLastRV() bool {
	rv := e.Query.Get("resourceVersion")
	return e.Verb == "watch" && e.Stage == "ResponseStarted" && rv != "" && rv != "0" &&
		e.Query.Get("sendInitialEvents") != "true"
}

// ListsAndWatches counts user's full lists and watches from its last
// resourceVersion per resource among the events received at or after
// since.
func ListsAndWatches(events []AuditEvent, user string, since time.Time) (lists, fromRV map[string]int) {
	lists, fromRV = map[string]int{}, map[string]int{}
	for _, e := range events {
		if e.User != user || e.At.Before(since) {
			continue
		}
		if e.FullList() {
			lists[e.Resource]++
		}
		if e.WatchFromLastRV() {
			fromRV[e.Resource]++
		}
	}
	return lists, fromRV
}
