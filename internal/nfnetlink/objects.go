package nfnetlink

import (
	"golang.org/x/sys/unix"
)

// The dumps below read only names, counts and flags from the kernel's
// answers, never rules or elements in full: a periodic check at 10k
// services stays a few dumps of small messages.

// Names streams a dump (typ, NFT_MSG_GETCHAIN, GETSET or GETRULE) of
// table's objects and collects one string attribute (nameAttr) of each.
// The kernel does not filter every dump by the table the request names:
// a chain dump returns the chains of every table of the family
// (iptables-nft's filter, nat and mangle), so each answer's table
// (tableAttr) is checked.
func (s *Socket) Names(typ uint16, fam byte, seq uint32, tableAttr uint16, table string, nameAttr uint16) ([]string, error) {
	var out []string
	err := s.Dump(DumpRequest(typ, fam, seq, StringAttr{tableAttr, table}), func(m Message) error {
		var name, owner []byte
		err := Walk(m.Attrs, func(t uint16, v []byte) {
			switch t {
			case nameAttr:
				name = TrimNUL(v)
			case tableAttr:
				owner = TrimNUL(v)
			}
		})
		if err == nil && string(owner) == table && len(name) > 0 {
			out = append(out, string(name))
		}
		return err
	})
	return out, err
}

// CountElements counts the elements of a set, an interval (a start and
// an end element in the kernel) once.
func (s *Socket) CountElements(fam byte, seq uint32, table, set string) (int, error) {
	count := 0
	req := DumpRequest(unix.NFT_MSG_GETSETELEM, fam, seq,
		StringAttr{unix.NFTA_SET_ELEM_LIST_TABLE, table}, StringAttr{unix.NFTA_SET_ELEM_LIST_SET, set})
	err := s.Dump(req, func(m Message) error {
		return eachElement(m.Attrs, func(elem []byte) error {
			if !isIntervalEnd(elem) {
				count++
			}
			return nil
		})
	})
	return count, err
}

func isIntervalEnd(elem []byte) bool {
	end := false
	_ = Walk(elem, func(typ uint16, v []byte) {
		if typ == unix.NFTA_SET_ELEM_FLAGS && len(v) == 4 {
			end = Uint32(v)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		}
	})
	return end
}

// eachElement hands each element of an element message (its
// NFTA_SET_ELEM_LIST_ELEMENTS) to fn, until fn fails.
func eachElement(attrs []byte, fn func(elem []byte) error) error {
	var err error
	walk := Walk(attrs, func(typ uint16, v []byte) {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS || err != nil {
			return
		}
		inner := Walk(v, func(typ uint16, elem []byte) {
			if typ == unix.NFTA_LIST_ELEM && err == nil {
				err = fn(elem)
			}
		})
		if err == nil {
			err = inner
		}
	})
	if err != nil {
		return err
	}
	return walk
}
