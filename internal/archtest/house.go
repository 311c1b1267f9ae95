package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The size of the house: a package a newcomer can read, a function one can
// hold in mind (RATIONALE.md, "One house").
const (
	MaxPackageLines  = 4000
	MaxFunctionLines = 120
)

// ThirdParty is the directory (relative to the repository root) of code
// the project did not write and keeps as its authors published it, with a
// recorded patch (its README.md): the house's sizes are not applied to it,
// so that it stays comparable, line for line, with what it was taken from.
const ThirdParty = "internal/thirdparty"

// Sizes walks the Go packages under root (testdata, hidden directories and
// ThirdParty excepted) and reports each directory whose non-test .go files hold more
// than maxPkg lines, and each non-test function longer than maxFunc lines
// (from its func keyword to its closing brace).
func Sizes(root string, maxPkg, maxFunc int) (bigPackages, longFuncs []string, err error) {
	pkgLines := map[string]int{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			if n := d.Name(); p != root && (n == "testdata" || strings.HasPrefix(n, ".") || filepath.ToSlash(rel) == ThirdParty) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pkgLines[filepath.Dir(p)] += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFunc {
				rel, _ := filepath.Rel(root, p)
				longFuncs = append(longFuncs, rel+": "+fd.Name.Name+" has "+strconv.Itoa(n)+" lines")
			}
		}
		return nil
	})
	for dir, n := range pkgLines {
		if n > maxPkg {
			rel, _ := filepath.Rel(root, dir)
			bigPackages = append(bigPackages, rel+" has "+strconv.Itoa(n)+" lines")
		}
	}
	sort.Strings(bigPackages)
	sort.Strings(longFuncs)
	return bigPackages, longFuncs, err
}

// HouseSizes fails the test for every package and function under root
// above the house's sizes.
func HouseSizes(t testing.TB, root string) {
	t.Helper()
	big, long, err := Sizes(root, MaxPackageLines, MaxFunctionLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range big {
		t.Errorf("package %s of non-test Go; keep a package under %d: split it by concern", b, MaxPackageLines)
	}
	for _, l := range long {
		t.Errorf("function %s; keep a function under %d", l, MaxFunctionLines)
	}
}
