package gitcfg

import (
	"slices"
	"testing"
)

// TestGitlinkWriter: the gitlinks of ls-files -s -z output, however git's
// writes cut it — a mode with high bits and one that does not read count,
// a path with a tab or a newline is kept whole.
func TestGitlinkWriter(t *testing.T) {
	out := "100644 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\ta.txt\x00" +
		"160000 4b825dc642cb6eb9a060e54bf8d69288fbee4904 0\tlib\x00" +
		"2000160000 4b825dc642cb6eb9a060e54bf8d69288fbee4904 0\thigh\x00" +
		"100755 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\tbin/x\x00" +
		"16x000 4b825dc642cb6eb9a060e54bf8d69288fbee4904 0\todd\x00" +
		"160000 4b825dc642cb6eb9a060e54bf8d69288fbee4904 0\tname\twith tab\nand newline\x00"
	want := []string{"lib", "high", "odd", "name\twith tab\nand newline"}
	for _, size := range []int{1, 2, 3, 7, 64, len(out)} {
		w := &gitlinkWriter{}
		for i := 0; i < len(out); i += size {
			if _, err := w.Write([]byte(out[i:min(i+size, len(out))])); err != nil {
				t.Fatal(err)
			}
		}
		if got := w.links(); !slices.Equal(got, want) {
			t.Errorf("writes of %d: %q, want %q", size, got, want)
		}
	}
}
