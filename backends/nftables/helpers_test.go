package nftables_test

import (
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func slicesSort(ns []proxier.ServicePortName) {
	slices.SortFunc(ns, func(a, b proxier.ServicePortName) int {
		return strings.Compare(a.String()+string(a.Protocol), b.String()+string(b.Protocol))
	})
}
