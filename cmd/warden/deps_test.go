package main

import (
	"os"
	"slices"
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

// TestInternalLayers: the packages under internal/ keep their layers (Go
// keeps them from outside cmd/warden, and from cycles): ui is a leaf, env
// builds on ui alone, and each command package on env and ui, runs being
// the one that others (jobs, mcpserver) build on too.
func TestInternalLayers(t *testing.T) {
	const in = "github.com/wardenrt/warden/cmd/warden/internal/"
	uses := map[string][]string{
		"ui":        {},
		"env":       {"ui"},
		"runs":      {"env", "ui"},
		"jobs":      {"env", "ui", "runs"},
		"mcpserver": {"env", "ui", "runs"},
		"toolcmd":   {"env", "ui"},
		"policycmd": {"env", "ui"},
		"statecmd":  {"env", "ui"},
	}
	ents, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		if _, ok := uses[d.Name()]; d.IsDir() && !ok {
			t.Errorf("internal/%s has no place in the layers: add it to this test", d.Name())
		}
	}
	for p, ok := range uses {
		var forbid []string
		for q := range uses {
			if q != p && !slices.Contains(ok, q) {
				forbid = append(forbid, in+q)
			}
		}
		archtest.Forbid(t, in+p, forbid...)
	}
}
