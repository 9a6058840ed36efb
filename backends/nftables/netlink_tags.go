package nftables

import (
	"encoding/binary"

	"github.com/google/nftables/userdata"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// An element whose verdict goes to a service port's chain carries the
// chain's tag (ruleset.ChainTag) in its userdata: the print of the
// chain's rules and the endpoint groups they draw from, as TLVs of types
// nft does not know and skips when it lists the element.
const (
	tagPrint  userdata.Type = 0xd0 // 8 bytes
	tagGroups userdata.Type = 0xd1 // per group: id, width (4 bytes each), local (1 byte)
)

func tagUserdata(t *ruleset.ChainTag) []byte {
	ud := userdata.Append(nil, tagPrint, binary.BigEndian.AppendUint64(nil, uint64(t.Print)))
	if len(t.Groups) > 0 {
		var b []byte
		for _, g := range t.Groups {
			b = binary.BigEndian.AppendUint32(b, g.ID)
			b = binary.BigEndian.AppendUint32(b, g.Width)
			local := byte(0)
			if g.Local {
				local = 1
			}
			b = append(b, local)
		}
		ud = userdata.Append(ud, tagGroups, b)
	}
	return ud
}

// parseTag reads an element's tag; nil when its userdata holds none.
func parseTag(ud []byte) *ruleset.ChainTag {
	p := userdata.Get(ud, tagPrint)
	if len(p) != 8 {
		return nil
	}
	t := &ruleset.ChainTag{Print: ruleset.ChainPrint(binary.BigEndian.Uint64(p))}
	gs := userdata.Get(ud, tagGroups)
	for ; len(gs) >= 9; gs = gs[9:] {
		t.Groups = append(t.Groups, ruleset.GroupRef{ID: binary.BigEndian.Uint32(gs), Width: binary.BigEndian.Uint32(gs[4:]), Local: gs[8] == 1})
	}
	return t
}

// A counter set's element (ruleset.ElementCounter) carries its comment as
// nft writes one ("comment" in `nft add element`), which nft shows.
func commentUserdata(c string) []byte {
	return userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, c)
}

func parseComment(ud []byte) string {
	c, _ := userdata.GetString(ud, userdata.NFTNL_UDATA_SET_ELEM_COMMENT)
	return c
}
