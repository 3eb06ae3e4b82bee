package jetstream_test

// Every exported declaration of the package has a doc comment that go doc
// shows, and the check can fail.

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Every exported declaration of the package has a doc comment that go doc
// shows: a function, a type, each method of an exported type, and each
// exported constant and variable (the comment of its group, or its own).
func TestExportedDocs(t *testing.T) {
	for _, name := range undocumented(t, ".") {
		t.Errorf("%s has no doc comment", name)
	}
}

// TestExportedDocsCatchesDetachedComment shows the check can fail: a
// method whose comment a declaration between them took, as go doc shows it.
func TestExportedDocsCatchesDetachedComment(t *testing.T) {
	dir := t.TempDir()
	src := `// Package p is documented.
package p

// T is documented.
type T struct{}

// M would document M, but the constant below takes it.
const limit = 1

func (T) M() {}
`
	if err := os.WriteFile(dir+"/p.go", []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(undocumented(t, dir), ","); got != "T.M" {
		t.Fatalf("undocumented = %q, want T.M", got)
	}
}

// undocumented returns the exported names of the package in dir (non-test
// files) that go doc shows without a doc comment.
func undocumented(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			f, err := parser.ParseFile(fset, dir+"/"+n, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	pkg, err := doc.NewFromFiles(fset, files, "example.com/p")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			if strings.TrimSpace(v.Doc) != "" {
				continue
			}
			for _, s := range v.Decl.Specs {
				vs := s.(*ast.ValueSpec)
				if vs.Doc != nil || vs.Comment != nil {
					continue
				}
				for _, n := range vs.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			if strings.TrimSpace(f.Doc) == "" {
				out = append(out, prefix+f.Name)
			}
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	funcs("", pkg.Funcs)
	for _, ty := range pkg.Types {
		if strings.TrimSpace(ty.Doc) == "" {
			out = append(out, ty.Name)
		}
		values(ty.Consts)
		values(ty.Vars)
		funcs("", ty.Funcs)
		funcs(ty.Name+".", ty.Methods)
	}
	return out
}
