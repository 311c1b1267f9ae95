package wasmtool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/runtime/gate"
)

// CollisionError is a module whose tool would be exposed under a name
// that a core tool or another module's tool already has (names that differ
// only in case count: a model or an MCP client may not tell them apart).
// Fix, when not nil, is a naming that resolves every collision of the
// module as things stand — each front end words it as a command.
type CollisionError struct {
	Module string
	// Tool is the exposed name that collides; Guest the module's own name
	// for the tool.
	Tool, Guest string
	// Core is true for a core tool; otherwise Other is the module
	// already providing the name.
	Core  bool
	Other string
	Fix   *Naming
}

func (e *CollisionError) Error() string {
	if e.Core {
		return fmt.Sprintf("tool name %q of module %s collides with a core tool", e.Tool, e.Module)
	}
	return fmt.Sprintf("tool name %q of module %s is already provided by module %s", e.Tool, e.Module, e.Other)
}

// ToolNameError is a tool whose exposed name is not valid as an OpenAI
// function name (^[a-zA-Z0-9_-]{1,64}$, which MCP tool names also allow).
// Fix, when not nil, aliases it to a valid name.
type ToolNameError struct {
	Module, Tool string
	Fix          *Naming
}

func (e *ToolNameError) Error() string {
	return fmt.Sprintf("tool name %q of module %s is invalid: a tool name is 1-64 letters, digits, _ or -", e.Tool, e.Module)
}

// ModuleNameError is a module name that is not a valid tool name; Fix is
// a valid one made from it ("" if none).
type ModuleNameError struct{ Name, Fix string }

func (e *ModuleNameError) Error() string {
	return fmt.Sprintf("module name %q is invalid: a module name is 1-64 letters, digits, _ or -", e.Name)
}

// ExistsError is an install under a name a module already has: approved
// (DroppedIn false), or its File dropped into Dir by hand and not
// approved. Free is a name no module has.
type ExistsError struct {
	Module    string
	DroppedIn bool
	File, Dir string
	Free      string
	// Fix names the tools of a copy installed as Free, when they need it
	// (a servlet's tools keep their names under another module name).
	Fix *Naming
}

func (e *ExistsError) Error() string {
	if e.DroppedIn {
		return fmt.Sprintf("%s already exists in %s (dropped in, not approved)", e.File, e.Dir)
	}
	return fmt.Sprintf("a module named %s is already installed", e.Module)
}

var prefixRe = lazyre.New(`^[a-zA-Z0-9_-]{1,32}$`)

// CheckNaming checks a naming the owner gave: a prefix of 1-32 letters,
// digits, _ or -; aliases to valid tool names.
func CheckNaming(n Naming) error {
	if n.Prefix != "" && !prefixRe.MatchString(n.Prefix) {
		return fmt.Errorf("prefix %q: use 1-32 letters, digits, _ or -", n.Prefix)
	}
	for _, own := range slices.Sorted(maps.Keys(n.Aliases)) {
		if own == "" {
			return fmt.Errorf("alias =%s: name the tool to alias (--alias OWN=NEW)", n.Aliases[own])
		}
		if a := n.Aliases[own]; !gate.ValidToolName(a) {
			return fmt.Errorf("alias %s=%s: %q is not a valid tool name (1-64 letters, digits, _ or -)", own, a, a)
		}
	}
	return nil
}

// applyNaming names p's tools by n: every alias must name one of the
// module's tools, and no two of them may share a name. Whether the names
// are valid and free is checkNames'.
func applyNaming(p *Pin, n Naming) error {
	p.Prefix, p.Aliases = n.Prefix, maps.Clone(n.Aliases)
	if len(p.Aliases) == 0 {
		p.Aliases = nil
	}
	own := map[string]bool{}
	for _, t := range p.Tools {
		own[t.guest()] = true
	}
	for _, a := range slices.Sorted(maps.Keys(n.Aliases)) {
		if !own[a] {
			return fmt.Errorf("module %s has no tool %q to alias (its tools: %s)", p.Module, a, strings.Join(slices.Sorted(maps.Keys(own)), ", "))
		}
	}
	seen := map[string]string{}
	for i := range p.Tools {
		t := &p.Tools[i]
		g := t.guest()
		t.Name = n.name(g)
		t.GuestName = ""
		if t.Name != g {
			t.GuestName = g
		}
		key := strings.ToLower(t.Name)
		if other, ok := seen[key]; ok {
			return fmt.Errorf("module %s: tools %s and %s would both be named %s", p.Module, other, g, t.Name)
		}
		seen[key] = g
	}
	return nil
}

var invalidChars = lazyre.New(`[^a-zA-Z0-9_-]+`)

// validName turns s into a valid tool name: other characters become _,
// and the name is cut at 64.
func validName(s string) string {
	s = strings.Trim(invalidChars.ReplaceAllString(s, "_"), "_")
	if len(s) > 64 {
		s = s[:64]
	}
	if !gate.ValidToolName(s) {
		return ""
	}
	return s
}

// usedNames maps the lowercase exposed names of the pinned modules other
// than skip to their module.
func usedNames(pins map[string]*Pin, skip string) map[string]string {
	used := map[string]string{}
	for _, m := range slices.Sorted(maps.Keys(pins)) {
		if m == skip {
			continue
		}
		for _, t := range pins[m].Tools {
			used[strings.ToLower(t.Name)] = m
		}
	}
	return used
}

// checkNames checks p's exposed names: each valid as an OpenAI function
// name (and so as an MCP tool name), none taken by a core tool (taken) or
// another module (used: lowercase name → module). The error carries a
// naming that makes them all valid and free, when one is found.
func checkNames(p *Pin, taken func(string) bool, used map[string]string) error {
	for _, t := range p.Tools {
		if !gate.ValidToolName(t.Name) {
			return &ToolNameError{Module: p.Module, Tool: t.Name, Fix: resolve(p, taken, used)}
		}
	}
	for _, t := range p.Tools {
		if core, other, ok := clash(t.Name, taken, used); ok {
			return &CollisionError{Module: p.Module, Tool: t.Name, Guest: t.guest(), Core: core, Other: other, Fix: resolve(p, taken, used)}
		}
	}
	return nil
}

func clash(name string, taken func(string) bool, used map[string]string) (core bool, other string, ok bool) {
	if taken != nil && (taken(name) || taken(strings.ToLower(name))) {
		return true, "", true
	}
	if m, ok := used[strings.ToLower(name)]; ok {
		return false, m, true
	}
	return false, "", false
}

// resolve finds a naming under which p's names are valid and free: the
// current one with aliases for invalid names, then the module's name as a
// prefix (bsky_search), else aliases for the tools that still clash.
func resolve(p *Pin, taken func(string) bool, used map[string]string) *Naming {
	cur := p.naming()
	fixInvalid := func(n Naming) Naming {
		n.Aliases = maps.Clone(n.Aliases)
		for _, t := range p.Tools {
			if name := n.name(t.guest()); !gate.ValidToolName(name) {
				if n.Aliases == nil {
					n.Aliases = map[string]string{}
				}
				n.Aliases[t.guest()] = validName(name)
			}
		}
		return n
	}
	ok := func(n Naming) bool {
		q := clonePin(p)
		if applyNaming(q, n) != nil {
			return false
		}
		for _, t := range q.Tools {
			if !gate.ValidToolName(t.Name) {
				return false
			}
			if _, _, c := clash(t.Name, taken, used); c {
				return false
			}
		}
		return true
	}
	cands := []Naming{fixInvalid(cur)}
	if cur.Prefix == "" {
		cands = append(cands, fixInvalid(Naming{Prefix: strings.TrimSuffix(p.Module, "_") + "_", Aliases: cur.Aliases}))
	}
	n := fixInvalid(cur)
	for _, t := range p.Tools {
		if _, _, c := clash(n.name(t.guest()), taken, used); c {
			if n.Aliases == nil {
				n.Aliases = map[string]string{}
			}
			n.Aliases[t.guest()] = validName(p.Module + "_" + t.guest())
		}
	}
	cands = append(cands, n)
	for _, c := range cands {
		if ok(c) {
			if len(c.Aliases) == 0 {
				c.Aliases = nil
			}
			return &c
		}
	}
	return nil
}

// loadReason words a name problem found at load, for `warden tool ls`.
func loadReason(module string, err error) string {
	var fix *Naming
	var ce *CollisionError
	var ne *ToolNameError
	switch {
	case errors.As(err, &ce):
		fix = ce.Fix
	case errors.As(err, &ne):
		fix = ne.Fix
	}
	msg := err.Error() + ": not loaded"
	if fix != nil {
		return msg + " (rename its tools: `warden tool approve " + shellWord(module) + " " + NamingFlags(*fix) + "`)"
	}
	return msg + " (remove one of the two with `warden tool rm`)"
}

// NamingFlags renders a naming as `warden tool install|approve` flags.
func NamingFlags(n Naming) string {
	var parts []string
	if n.Prefix != "" {
		parts = append(parts, "--prefix "+shellWord(n.Prefix))
	}
	for _, own := range slices.Sorted(maps.Keys(n.Aliases)) {
		parts = append(parts, "--alias "+shellWord(own+"="+n.Aliases[own]))
	}
	return strings.Join(parts, " ")
}

var plainWord = lazyre.New(`^[a-zA-Z0-9_=./:@+,-]+$`)

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// freeName is name with the first suffix (2, 3, …) that no pin or file
// uses.
func (h *Host) freeName(ctx context.Context, name string) string {
	pins, _ := h.pins(ctx)
	for i := 2; i < 100; i++ {
		n := fmt.Sprintf("%s%d", name, i)
		if len(n) > 64 {
			n = fmt.Sprintf("%s%d", name[:64-len(strconv.Itoa(i))], i)
		}
		if _, ok := pins[n]; ok {
			continue
		}
		if _, err := os.Lstat(h.wasmPath(n)); err == nil {
			continue
		}
		if _, err := os.Lstat(h.sidecarPath(n)); err == nil {
			continue
		}
		return n
	}
	return ""
}
