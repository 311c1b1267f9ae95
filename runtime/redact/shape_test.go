package redact

import (
	"math/rand"
	"strings"
	"testing"
)

// checkShapes holds each rule's token shapes to its expression: at every
// position of s, to the end of its line and to the end of s, the shapes
// match what the expression matches, or nothing where it matches nothing.
func checkShapes(t *testing.T, s string) {
	t.Helper()
	for ri := range rules {
		r := &rules[ri]
		if r.shapes == nil {
			continue
		}
		for p := range len(s) {
			for _, end := range []int{lineEnd(s, p), len(s)} {
				text := s[p:end]
				want := -1
				if m := r.re.FindStringSubmatchIndex(text); m != nil {
					want = m[1]
				}
				if got := matchShapes(r.shapes, text); got != want {
					t.Fatalf("rule %d (%s) at %q: shapes match to %d, the expression to %d", ri, r.kind, text, got, want)
				}
			}
		}
	}
}

// genShapeText makes text dense in token shapes: their prefixes, runs of
// their classes about as long as they need, and what may end a run.
func genShapeText(rng *rand.Rand) string {
	var prefixes []string
	for _, r := range rules {
		for _, sh := range r.shapes {
			prefixes = append(prefixes, sh.prefixes...)
		}
	}
	classes := []string{"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "aZ9_-"}
	ends := []string{"", "_", "-", ".", " ", "\n", "a", "Z", "9", "é", "\xff", "="}
	var b strings.Builder
	for range 1 + rng.Intn(4) {
		b.WriteString(prefixes[rng.Intn(len(prefixes))])
		class := classes[rng.Intn(len(classes))]
		for range 10 + rng.Intn(32) {
			b.WriteByte(class[rng.Intn(len(class))])
		}
		b.WriteString(ends[rng.Intn(len(ends))])
	}
	return b.String()
}

// TestTokenShapes: the token shapes read as their expressions do.
func TestTokenShapes(t *testing.T) {
	for _, r := range rules {
		for _, sh := range r.shapes {
			for c := range sh.class {
				if sh.least < 1 || sh.boundary && sh.class[c] && !wordBytes[c] {
					t.Fatalf("rule %s: a shape with no run, or a boundary after a class with a byte not a word's (%q)", r.kind, rune(c))
				}
			}
		}
	}
	rng := rand.New(rand.NewSource(11))
	n := 3000
	if raceEnabled { // one goroutine: the race detector finds nothing here, at 10× the time
		n = 300
	}
	for range n {
		checkShapes(t, genShapeText(rng))
		checkShapes(t, genScanText(rng))
	}
	for _, s := range []string{
		"AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPL", "AKIAIOSFODNN7EXAMPLE_", "AKIAIOSFODNN7EXAMPLE-",
		"hf_" + strings.Repeat("a1", 15), "hf_" + strings.Repeat("a1", 15) + "_", "hf_" + strings.Repeat("a1", 15) + "-x",
		"npm_" + strings.Repeat("a", 36), "npm_" + strings.Repeat("a", 37), "npm_" + strings.Repeat("a", 36) + "_",
		"AIza" + strings.Repeat("_", 35), "AIza" + strings.Repeat("-", 40), "sk-None-" + strings.Repeat("x", 20),
		"github_pat_" + strings.Repeat("_", 22), "ghp_" + strings.Repeat("A", 29), "sk_live_" + strings.Repeat("0", 16),
	} {
		checkShapes(t, s)
	}
}
