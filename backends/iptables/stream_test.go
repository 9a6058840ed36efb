package iptables

import (
	"bytes"
	"context"
	"io"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// streamingFake is the fake as a runner.StreamRestorer: it collects what
// a streamed payload writes and restores that.
type streamingFake struct {
	*iptablestest.Fake
	streamed int
}

var _ runner.StreamRestorer = (*streamingFake)(nil)

func (s *streamingFake) RestoreFrom(ctx context.Context, fam runner.Family, payload io.WriterTo) error {
	var b bytes.Buffer
	if _, err := payload.WriteTo(&b); err != nil {
		return &runner.RestoreError{Err: err}
	}
	s.streamed++
	return s.Fake.Restore(ctx, fam, b.Bytes())
}

// TestStreamedPayloadsAreTheBufferedOnes: with a runner that streams, a
// first full sync, a partial one and a later full one send exactly the
// payloads they send buffered, all of them streamed.
func TestStreamedPayloadsAreTheBufferedOnes(t *testing.T) {
	run := func(streamed bool) (*iptablestest.Fake, int) {
		fake := iptablestest.NewFake()
		sf := &streamingFake{Fake: fake}
		b := newTestBackend(t, fake, func(c *Config) {
			c.ChunkRules = 50 // several transactions in the full syncs
			if streamed {
				c.Runner = sf
			}
		})
		st := bigState(40, 3)
		mustSync(t, b, st, fullDiff())
		name := spn("bench", "svc-7", "http", v1.ProtocolTCP)
		st.Endpoints[name] = benchEndpoints(7, 2, 1)
		mustSync(t, b, st, changedDiff(false, name))
		delete(st.Services, name)
		mustSync(t, b, st, &proxier.Diff{Full: true})
		return fake, sf.streamed
	}
	buffered, _ := run(false)
	streamed, n := run(true)
	want, got := buffered.Restores(), streamed.Restores()
	if n != len(got) || n < 3 {
		t.Errorf("%d of %d restores streamed, want all (at least 3)", n, len(got))
	}
	if len(got) != len(want) {
		t.Fatalf("%d restores streamed, %d buffered", len(got), len(want))
	}
	for i := range want {
		if diff := cmp.Diff(string(want[i].Data), string(got[i].Data)); diff != "" {
			t.Errorf("restore %d (-buffered +streamed):\n%s", i+1, diff)
		}
	}
}
