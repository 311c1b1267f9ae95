package unidiff

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// applyDiff applies a unified diff made by Unified to old.
func applyDiff(t *testing.T, old, diff string) string {
	t.Helper()
	a := SplitLines(old)
	lines := strings.SplitAfter(diff, "\n")
	var out []string
	pos := 0
	for i := 2; i < len(lines) && lines[i] != ""; i++ {
		l := lines[i]
		if strings.HasPrefix(l, "@@ ") {
			var os1, on, ns, nn int
			if _, err := fmt.Sscanf(l, "@@ -%d,%d +%d,%d @@", &os1, &on, &ns, &nn); err != nil {
				t.Fatalf("bad hunk header %q", l)
			}
			start := os1 - 1
			if on == 0 {
				start = os1
			}
			out = append(out, a[pos:start]...)
			pos = start
			continue
		}
		body := l[1:]
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\\ No newline") {
			body = strings.TrimSuffix(body, "\n")
			i++
		}
		switch l[0] {
		case ' ':
			if a[pos] != body {
				t.Fatalf("context %q does not match %q", body, a[pos])
			}
			out = append(out, body)
			pos++
		case '-':
			if a[pos] != body {
				t.Fatalf("removed %q does not match %q", body, a[pos])
			}
			pos++
		case '+':
			out = append(out, body)
		default:
			t.Fatalf("bad diff line %q", l)
		}
	}
	out = append(out, a[pos:]...)
	return strings.Join(out, "")
}

func TestUnified(t *testing.T) {
	got, _ := Unified("a/x", "b/x", "a\nb\nc\n", "a\nc\nd", 1<<20)
	want := "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n c\n+d\n\\ No newline at end of file\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got, _ := Unified("a", "b", "same\n", "same\n", 100); got != "(no changes)\n" {
		t.Fatalf("%q", got)
	}
	// Two changes far apart make two hunks.
	var old, new bytes.Buffer
	for i := range 30 {
		fmt.Fprintf(&old, "%d\n", i)
		if i == 2 || i == 25 {
			fmt.Fprintf(&new, "changed %d\n", i)
		} else {
			fmt.Fprintf(&new, "%d\n", i)
		}
	}
	got, _ = Unified("a", "b", old.String(), new.String(), 1<<20)
	if strings.Count(got, "@@ -") != 2 || !strings.Contains(got, "@@ -1,6 +1,6 @@") || !strings.Contains(got, "@@ -23,7 +23,7 @@") {
		t.Fatalf("%s", got)
	}
	// Cut with a marker.
	got, cut := Unified("a", "b", "", strings.Repeat("line\n", 1000), 200)
	if !cut || len(got) > 300 || !strings.Contains(got, "[diff truncated:") {
		t.Fatalf("%v %q", cut, got)
	}
	// Random edits round-trip, the minimal path and the fallback alike.
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e", "f\n"}
	gen := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(words[r.IntN(len(words))])
		}
		return sb.String()
	}
	for i := range 300 {
		n := r.IntN(40)
		if i%50 == 0 {
			n = 3000
		}
		a, b := gen(n), gen(r.IntN(40)+n/2)
		d, _ := Unified("a", "b", a, b, 1<<30)
		if a == b {
			continue
		}
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("round trip %d failed:\nold %q\nnew %q\ndiff\n%s\ngot %q", i, a, b, d, got)
		}
	}
}
