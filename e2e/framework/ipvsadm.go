package framework

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// IPVSVirtualServer is one virtual server of an `ipvsadm -Ln` listing, the
// view an operator of an ipvs-mode node has.
type IPVSVirtualServer struct {
	// Key is "PROTO ADDR:PORT" (e.g. "TCP 10.96.0.10:80") or "FWM MARK".
	Key       string
	Scheduler string
	Flags     string // e.g. "persistent 10800"; empty when none
	Reals     []IPVSRealServer
}

// IPVSRealServer is one "-> ADDR:PORT Forward Weight ActiveConn InActConn"
// line under a virtual server.
type IPVSRealServer struct {
	Addr    string // "IP:PORT"
	Forward string // Masq, Route, Tunnel, ...
	Weight  int
}

// ParseIPVSList parses the output of `ipvsadm -Ln` (numeric addresses) into
// its virtual servers, in listing order.
func ParseIPVSList(out string) ([]IPVSVirtualServer, error) {
	var vss []IPVSVirtualServer
	for n, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0, strings.HasPrefix(line, "IP Virtual Server"),
			strings.HasPrefix(line, "Prot LocalAddress"), strings.Contains(line, "RemoteAddress:Port"):
			continue
		case fields[0] == "->":
			if len(vss) == 0 || len(fields) < 4 {
				return nil, fmt.Errorf("ipvsadm line %d: real server %q outside a virtual server", n+1, line)
			}
			w, err := strconv.Atoi(fields[3])
			if err != nil {
				return nil, fmt.Errorf("ipvsadm line %d: weight in %q: %w", n+1, line, err)
			}
			last := &vss[len(vss)-1]
			last.Reals = append(last.Reals, IPVSRealServer{Addr: fields[1], Forward: fields[2], Weight: w})
		case len(fields) >= 3 && slices.Contains([]string{"TCP", "UDP", "SCTP", "FWM"}, fields[0]):
			vss = append(vss, IPVSVirtualServer{
				Key: fields[0] + " " + fields[1], Scheduler: fields[2], Flags: strings.Join(fields[3:], " "),
			})
		default:
			return nil, fmt.Errorf("ipvsadm line %d: unexpected %q", n+1, line)
		}
	}
	return vss, nil
}

// FindIPVS returns the virtual server with key ("TCP 10.96.0.10:80"), if
// listed.
func FindIPVS(vss []IPVSVirtualServer, key string) (IPVSVirtualServer, bool) {
	for _, v := range vss {
		if v.Key == key {
			return v, true
		}
	}
	return IPVSVirtualServer{}, false
}
