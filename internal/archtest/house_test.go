package archtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHouse: no package of the repository above 4,000 lines of non-test
// Go, no function above 120.
func TestHouse(t *testing.T) {
	HouseSizes(t, filepath.Join("..", ".."))
}

// TestThirdPartyRecorded: what the house's sizes leave out is code the
// project took from elsewhere, each directory with its authors' licence
// and a README.md that names where it comes from and what was changed.
func TestThirdPartyRecorded(t *testing.T) {
	root := filepath.Join("..", "..", filepath.FromSlash(ThirdParty))
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		if !d.IsDir() {
			t.Errorf("%s/%s: only directories, one per module taken", ThirdParty, d.Name())
			continue
		}
		for _, f := range []string{"LICENSE", "README.md"} {
			if _, err := os.Stat(filepath.Join(root, d.Name(), f)); err != nil {
				t.Errorf("%s/%s has no %s: say where it comes from, under which licence, and what was changed", ThirdParty, d.Name(), f)
			}
		}
	}
}

// TestSizesFindsBoth: the check sees a big package and a long function.
func TestSizesFindsBoth(t *testing.T) {
	dir := t.TempDir()
	body := "package p\n\nfunc long() {\n"
	for i := 0; i < 130; i++ {
		body += "\t_ = 1\n"
	}
	body += "}\n"
	if err := os.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p", "p.go"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	big, long, err := Sizes(dir, 100, 120)
	if err != nil || len(big) != 1 || len(long) != 1 {
		t.Fatalf("big %v long %v err %v", big, long, err)
	}
}

// TestNoOutsideReferences: no Go file (tests included) cites a document a
// user of the project never has — the specification's sections, a design
// file, the catalogue's source documents — or uses the word those came
// under; the contract is docs/. (The words are assembled so that this file
// does not name them.)
func TestNoOutsideReferences(t *testing.T) {
	ScanWords(t, []string{"SPEC" + " §", "DESIGN" + ".md", "se" + "ed "}, filepath.Join("..", ".."), true)
}
