package nfnetlink

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestElementFixture: one verdict map element and one interval, byte for
// byte as the kernel reads them.
func TestElementFixture(t *testing.T) {
	b := appendElement(nil, &Element{Key: []byte{10, 0, 0, 1}, Verdict: &Verdict{Code: unix.NFT_GOTO, Chain: "s"}, Userdata: []byte{0xd0, 1, 9}}, true)
	want := bytes.Join([][]byte{
		hdr(48, unix.NFTA_LIST_ELEM|unix.NLA_F_NESTED),
		hdr(12, unix.NFTA_SET_ELEM_KEY|unix.NLA_F_NESTED), hdr(8, unix.NFTA_DATA_VALUE), {10, 0, 0, 1},
		hdr(24, unix.NFTA_SET_ELEM_DATA|unix.NLA_F_NESTED), hdr(20, unix.NFTA_DATA_VERDICT|unix.NLA_F_NESTED),
		hdr(8, unix.NFTA_VERDICT_CODE), {0xff, 0xff, 0xff, 0xfc}, hdr(6, unix.NFTA_VERDICT_CHAIN), {'s', 0, 0, 0},
		hdr(7, unix.NFTA_SET_ELEM_USERDATA), {0xd0, 1, 9, 0},
	}, nil)
	if !bytes.Equal(b, want) {
		t.Errorf("verdict element\n%v\nwant\n%v", b, want)
	}
	b = appendElement(nil, &Element{Key: []byte{0, 1, 0, 0}, End: []byte{0, 2, 0, 0}, Data: []byte{1, 2, 3, 4}}, false)
	want = bytes.Join([][]byte{
		hdr(16, unix.NFTA_LIST_ELEM|unix.NLA_F_NESTED), hdr(12, unix.NFTA_SET_ELEM_KEY|unix.NLA_F_NESTED), hdr(8, unix.NFTA_DATA_VALUE), {0, 1, 0, 0},
		hdr(24, unix.NFTA_LIST_ELEM|unix.NLA_F_NESTED), hdr(8, unix.NFTA_SET_ELEM_FLAGS), {0, 0, 0, 1},
		hdr(12, unix.NFTA_SET_ELEM_KEY|unix.NLA_F_NESTED), hdr(8, unix.NFTA_DATA_VALUE), {0, 2, 0, 0},
	}, nil)
	if !bytes.Equal(b, want) {
		t.Errorf("deleted interval (key alone)\n%v\nwant\n%v", b, want)
	}
}

// TestElementsRoundTrip writes elements of every kind (verdict with
// userdata, data, plain, interval) as a batch lays them out and reads
// them back as a dump decodes them.
func TestElementsRoundTrip(t *testing.T) {
	els := []Element{
		{Key: []byte{10, 96, 0, 10, 6, 0, 0, 0}, Verdict: &Verdict{Code: unix.NFT_GOTO, Chain: "service-X"}, Userdata: []byte{0xd0, 2, 1, 2}},
		{Key: []byte{0, 1, 0, 0}, End: []byte{0, 1, 128, 0}, Data: []byte{10, 244, 1, 2, 0x1f, 0x90, 0, 0}},
		{Key: bytes.Repeat([]byte{0xfd}, 32)},
	}
	b := NewBatch()
	defer b.Release()
	if err := b.Elements(unix.NFPROTO_IPV4, "kp", "s", true, len(els), func(i int) *Element { return &els[i] }); err != nil {
		t.Fatal(err)
	}
	msgs := parseBatch(t, b)
	if len(msgs) != 2 || msgs[1].Header.Type != msgType(unix.NFT_MSG_NEWSETELEM) || msgs[1].Header.Flags != unix.NLM_F_REQUEST|unix.NLM_F_CREATE {
		t.Fatalf("messages %v", msgs)
	}
	var got []Element
	err := ParseElements(msgs[1].Data[genmsgLen:], func(e *Element) error {
		c := *e
		if e.Verdict != nil {
			v := *e.Verdict
			c.Verdict = &v
		}
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Element{els[0], {Key: els[1].Key, Data: els[1].Data}, {Key: els[1].End, IntervalEnd: true}, els[2]}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("read back differs (-written +read):\n%s", d)
	}
}

// TestParseElementCounter: one expression, or a list of them.
func TestParseElementCounter(t *testing.T) {
	counter := nested(unix.NFTA_LIST_ELEM, AppendString(nil, unix.NFTA_EXPR_NAME, "counter"), nested(unix.NFTA_EXPR_DATA,
		AppendAttr(nil, unix.NFTA_COUNTER_BYTES, []byte{0, 0, 0, 0, 0, 0, 1, 0}),
		AppendAttr(nil, unix.NFTA_COUNTER_PACKETS, []byte{0, 0, 0, 0, 0, 0, 0, 3})))
	key := nested(unix.NFTA_SET_ELEM_KEY, AppendAttr(nil, unix.NFTA_DATA_VALUE, []byte{1, 2, 3, 4}))
	single := append(append([]byte(nil), key...), AppendAttr(nil, unix.NFTA_SET_ELEM_EXPR|unix.NLA_F_NESTED, counter[4:])...)
	list := append(append([]byte(nil), key...), nested(SetElemExpressions, counter)...)
	for name, elem := range map[string][]byte{"single": single, "list": list} {
		msg := nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, nested(unix.NFTA_LIST_ELEM, elem))
		var got Counter
		err := ParseElements(msg, func(e *Element) error {
			if e.Counter == nil {
				return fmt.Errorf("no counter")
			}
			got = *e.Counter
			return nil
		})
		if err != nil || got != (Counter{Packets: 3, Bytes: 256}) {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
}

// TestElementMessagesSplit: at most MaxElementsPerMessage kernel elements
// a message, an interval never split from its end; a deletion is a
// DELSETELEM.
func TestElementMessagesSplit(t *testing.T) {
	e := &Element{Key: []byte{0, 0, 0, 1}, End: []byte{0, 0, 0, 2}, Data: []byte{10, 0, 0, 1, 0, 80, 0, 0}}
	b := NewBatch()
	defer b.Release()
	if err := b.Elements(unix.NFPROTO_IPV4, "kp", "s", false, MaxElementsPerMessage, func(int) *Element { return e }); err != nil {
		t.Fatal(err)
	}
	msgs := parseBatch(t, b)
	if b.Messages() != 2 || msgs[1].Header.Type != msgType(unix.NFT_MSG_DELSETELEM) {
		t.Errorf("%d intervals in %d messages, want 2 DELSETELEM", MaxElementsPerMessage, b.Messages())
	}
}

// TestElementMessagesSplitBySize: 512 elements of ~130 bytes exceed 64
// KiB: they go in more than one message, each list within netlink's
// 16-bit length.
func TestElementMessagesSplitBySize(t *testing.T) {
	b := NewBatch()
	defer b.Release()
	err := b.Elements(unix.NFPROTO_IPV6, "kp", "s", true, MaxElementsPerMessage, func(i int) *Element {
		chain := fmt.Sprintf("service-ABCDEFGH-a-long-namespace-name.a-long-service-name-%05d.tcp.https", i)
		return &Element{Key: make([]byte, 24), Verdict: &Verdict{Code: unix.NFT_GOTO, Chain: chain}, Userdata: make([]byte, 12)}
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Messages() < 2 {
		t.Errorf("%d elements in %d message", MaxElementsPerMessage, b.Messages())
	}
	for _, m := range parseBatch(t, b)[1:] {
		if len(m.Data) > 0xffff {
			t.Errorf("a message of %d bytes", len(m.Data))
		}
	}
}
