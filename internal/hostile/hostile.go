// Package hostile makes the hostile inputs warden's tests throw at the
// decoder of bytes from outside (runtime/decode) and at the loaders that
// use it: alias bombs, deep nesting, oversized files. Nothing here is
// committed as data; every input is generated when a test runs.
package hostile

import (
	"fmt"
	"os"
	"strings"
)

// AliasBomb is a YAML flow sequence of levels anchors, each a list of ten
// aliases of the one before ("billion laughs"): a few hundred bytes whose
// full expansion has about 10^levels values. It goes wherever a value
// does: "grants: " + AliasBomb(8).
func AliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("[&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, ", &a%d [", i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]")
	}
	b.WriteString("]")
	return b.String()
}

// DeepBlock is a YAML block sequence nested depth levels ("- - - … x").
func DeepBlock(depth int) string { return strings.Repeat("- ", depth) + "x" }

// DeepFlow is a YAML (and JSON) flow sequence nested depth levels.
func DeepFlow(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// DeepJSON is a JSON object nested depth levels: {"a":{"a":…1…}}.
func DeepJSON(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// Sparse makes path a file of size bytes that begins with head and takes
// no room on disk (a hole): a 200 MB policy that costs nothing to make.
func Sparse(path, head string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(head); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
