package runner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shells are the programs that would interpret a command line.
func shells() []string {
	return []string{"sh", "bash", "dash", "zsh", "ash", "ksh", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash", "/usr/bin/env"}
}

// TestNoShellInProductionCode scans every non-test Go file of the module:
// iptables, ipset, conntrack and every other program must be run with an
// argument vector (os/exec or this package's Command), never through a
// shell, so no Service name, comment or address can ever be interpreted as
// shell syntax. It flags exec.Command/CommandContext and Command{Name: ...}
// naming a shell, and any "-c" argument literal passed to them.
func TestNoShellInProductionCode(t *testing.T) {
	root := moduleRoot(t)
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		scanned++
		for _, problem := range shellUses(t, path) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s:%s", rel, problem)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d files under %s", scanned, root)
	}
}

// TestShellUsesDetected proves the scanner finds what it looks for.
func TestShellUsesDetected(t *testing.T) {
	src := `package x
import ("context"; osexec "os/exec"; "example.com/runner")
func f(ctx context.Context) {
	osexec.Command("sh", "-c", "iptables -F")
	osexec.CommandContext(ctx, "/bin/bash", "x")
	_ = runner.Command{Name: "bash", Args: []string{"-c", "ipset list"}}
	osexec.Command("iptables", "-t", "nat", "-S")
	_ = []string{"rr", "sh"} // an IPVS scheduler name, not a shell
}`
	path := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shellUses(t, path); len(got) != 4 {
		t.Errorf("found %d problems, want 4: %q", len(got), got)
	}
}

// shellUses parses one file and lists its shell invocations.
func shellUses(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	execName := importName(f, "os/exec")
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, strconv.Itoa(fset.Position(n.Pos()).Line)+": "+what)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && isIdent(sel.X, execName) && (sel.Sel.Name == "Command" || sel.Sel.Name == "CommandContext") {
				checkArgs(x.Args, report)
			}
		case *ast.CompositeLit:
			if isCommandType(x.Type) {
				for _, e := range x.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Name") && isShell(kv.Value) {
						report(kv, "Command runs a shell")
					}
				}
			}
		}
		return true
	})
	return out
}

func checkArgs(args []ast.Expr, report func(ast.Node, string)) {
	for _, a := range args {
		if isShell(a) {
			report(a, "exec runs a shell")
		}
		if s, ok := stringLit(a); ok && s == "-c" {
			report(a, `exec passes "-c"`)
		}
	}
}

func isCommandType(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name == "Command"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Command"
	}
	return false
}

func isShell(e ast.Expr) bool {
	s, ok := stringLit(e)
	return ok && slices.Contains(shells(), s)
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && name != "" && id.Name == name
}

// importName is the local name of an import path in f, "" if not imported.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// moduleRoot walks up from the package directory to go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}
