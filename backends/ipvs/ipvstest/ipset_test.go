package ipvstest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFakeIPSetIsStrict(t *testing.T) {
	ctx := context.Background()
	f := NewFakeIPSet()
	setup := "create S hash:ip,port family inet\nadd S 10.96.0.10,tcp:80\ncreate P bitmap:port range 0-65535\n"
	if err := f.Restore(ctx, []byte(setup)); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"add S 10.96.0.10,tcp:80",             // already there, no -exist
		"del S 10.96.0.11,tcp:80",             // not there, no -exist
		"add S fd00::1,tcp:80",                // wrong family
		"add S 10.96.0.12",                    // wrong form for the type
		"add NOPE 10.96.0.12,tcp:80",          // no such set
		"create S hash:ip,port",               // exists, no -exist
		"create S hash:ip family inet -exist", // exists with another type
		"create Q bitmap:port",                // no range
		"destroy NOPE",
	}
	for _, b := range bad {
		if err := f.Restore(ctx, []byte(b+"\n")); err == nil {
			t.Errorf("accepted %q", b)
		}
	}
	// The first failing line stops the restore; earlier lines stay.
	err := f.Restore(ctx, []byte("add S 10.96.0.20,tcp:80\nadd S bogus\nadd S 10.96.0.21,tcp:80\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %v, want one naming line 2", err)
	}
	if diff := cmp.Diff([]string{"10.96.0.10,tcp:80", "10.96.0.20,tcp:80"}, f.Entries("S")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	f.SetInUse(func(name string) bool { return name == "S" })
	if err := f.Restore(ctx, []byte("destroy S\n")); err == nil {
		t.Errorf("destroyed a set in use")
	}
	if err := f.Restore(ctx, []byte("add S 10.96.0.10,tcp:80 -exist\ndel S 10.96.0.99,tcp:80 -exist\ndestroy P\n")); err != nil {
		t.Errorf("-exist and destroy: %v", err)
	}
	saved, _ := f.Save(ctx)
	want := "create S hash:ip,port family inet\nadd S 10.96.0.10,tcp:80\nadd S 10.96.0.20,tcp:80\n"
	if string(saved) != want {
		t.Errorf("Save:\n%s\nwant:\n%s", saved, want)
	}
}
