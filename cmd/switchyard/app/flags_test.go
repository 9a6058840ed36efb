package app

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func flagNames(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// TestSettingsTable keeps the flag/file/field table consistent with the
// registered flags, rawConfig and the KubeProxyConfiguration schema.
func TestSettingsTable(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	defaultRawConfig().addFlags(fs)
	registered := flagNames(fs)
	raw := reflect.TypeFor[rawConfig]()
	var tableFlags []string
	for _, s := range settings() {
		tableFlags = append(tableFlags, s.flag)
		if fs.Lookup(s.flag) == nil {
			t.Errorf("setting %q has no registered flag", s.flag)
		}
		if _, ok := raw.FieldByName(s.goField); !ok {
			t.Errorf("setting %q: rawConfig has no field %s", s.flag, s.goField)
		}
		if s.field != "" && !fileHasPath(s.field) {
			t.Errorf("setting %q: config file has no field %q", s.flag, s.field)
		}
	}
	for _, name := range registered {
		if !slices.Contains(tableFlags, name) {
			t.Errorf("flag --%s is missing from settings()", name)
		}
	}
}

func fileHasPath(path string) bool {
	t := reflect.TypeFor[fileConfig]()
	for _, part := range strings.Split(path, ".") {
		ft, ok := jsonFields(t)[part]
		if !ok {
			return false
		}
		t = ft
	}
	return true
}
