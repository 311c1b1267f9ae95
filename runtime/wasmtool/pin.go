package wasmtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Pins is where approvals are kept (the store's pins bucket): one JSON
// document per module name. Pin returns an error wrapping
// gate.ErrNotFound for a module never approved.
type Pins interface {
	Pin(ctx context.Context, name string) (json.RawMessage, error)
	PutPin(ctx context.Context, name string, doc json.RawMessage) error
	DeletePin(ctx context.Context, name string) error
	ListPins(ctx context.Context) (map[string]json.RawMessage, error)
}

// Pin is a module as its owner approved it: the sha256 of its bytes and of
// its sidecar, what it declared (ABI, tools and their schemas, requested
// capabilities, limits, config) and what the owner granted it. A module is
// loaded only while its files hash to the pin; its tools are served from
// the pin, so what runs is what was reviewed.
type Pin struct {
	Module        string            `json:"module"`
	SHA256        string            `json:"sha256"`
	Size          int64             `json:"size"`
	SidecarSHA256 string            `json:"sidecar_sha256,omitempty"`
	ABI           string            `json:"abi"`
	Tools         []ToolSpec        `json:"tools"`
	Requested     []string          `json:"requested"`
	Granted       []string          `json:"granted"`
	Limits        Limits            `json:"limits"`
	Config        map[string]string `json:"config,omitempty"`
	// InputFrom names the string argument passed as the raw input of an
	// Extism plugin or command ("": the JSON arguments); Output is the
	// sidecar's output mode ("", json or text).
	InputFrom string `json:"input_from,omitempty"`
	Output    string `json:"output,omitempty"`
	// Prefix and Aliases name the module's tools for warden: a tool is
	// exposed as its alias, else Prefix + its own name. Chosen by the
	// owner at install or approve (a remedy for name collisions).
	Prefix  string            `json:"prefix,omitempty"`
	Aliases map[string]string `json:"aliases,omitempty"`
	// OwnerConfig is what `warden tool config` set: KEY → a value, or
	// "env:VAR" for a secret read from warden's environment at each call
	// (the value is never stored). It overrides the sidecar's config.
	OwnerConfig map[string]string `json:"owner_config,omitempty"`
	ApprovedAt  time.Time         `json:"approved_at"`
	ApprovedBy  string            `json:"approved_by"`
}

// Naming is how a module's tools are named for warden.
type Naming struct {
	// Prefix is put before each tool's own name.
	Prefix string
	// Aliases maps a tool's own name to the name warden exposes; an alias
	// wins over the prefix.
	Aliases map[string]string
}

func (n Naming) name(own string) string {
	if a, ok := n.Aliases[own]; ok {
		return a
	}
	return n.Prefix + own
}

func (n Naming) equal(o Naming) bool {
	return n.Prefix == o.Prefix && mapsEqual(n.Aliases, o.Aliases)
}

// naming is the pin's naming.
func (p *Pin) naming() Naming { return Naming{Prefix: p.Prefix, Aliases: p.Aliases} }

// ToolSpec is one tool a module provides.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Export is the function called (extism: the sidecar's export;
	// servlet: call; command: _start).
	Export string `json:"export"`
	// GuestName is the tool's own name, which a servlet's call receives,
	// when warden exposes it under another (Name); "" when the same.
	GuestName string `json:"guest_name,omitempty"`
	// ModuleSchema is the input schema as the module (or its sidecar)
	// gave it, when warden enforces another (InputSchema: closed,
	// repaired, or the owner's override).
	ModuleSchema json.RawMessage `json:"module_schema,omitempty"`
	// Schema says what warden did to the schema; Overrides lists what
	// the owner's sidecar replaced ("description", "input_schema").
	Schema    *SchemaReport `json:"schema,omitempty"`
	Overrides []string      `json:"overrides,omitempty"`
}

// Notes says, one line each, how warden serves the tool differently from
// what its module says: its name, the objects closed and left open, each
// repair, each override.
func (t ToolSpec) Notes() []string {
	var out []string
	if t.GuestName != "" {
		out = append(out, fmt.Sprintf("exposed as %s; the module calls it %s", t.Name, t.GuestName))
	}
	for _, o := range t.Overrides {
		out = append(out, o+" overridden by the sidecar")
	}
	if t.Schema != nil {
		if len(t.Schema.Closed) > 0 {
			out = append(out, "closed (additionalProperties: false) at "+strings.Join(t.Schema.Closed, ", "))
		}
		for _, o := range t.Schema.Open {
			out = append(out, "left open: "+o)
		}
		for _, r := range t.Schema.Repairs {
			out = append(out, "repaired: "+r)
		}
	}
	return out
}

// guest is the name the module knows the tool by.
func (t ToolSpec) guest() string {
	if t.GuestName != "" {
		return t.GuestName
	}
	return t.Name
}

// moduleSchema is the schema as the module gave it.
func (t ToolSpec) moduleSchema() json.RawMessage {
	if len(t.ModuleSchema) > 0 {
		return t.ModuleSchema
	}
	return t.InputSchema
}

// clonePin is a deep copy of p.
func clonePin(p *Pin) *Pin {
	c := *p
	c.Tools = slices.Clone(p.Tools)
	for i := range c.Tools {
		c.Tools[i].InputSchema = slices.Clone(c.Tools[i].InputSchema)
		c.Tools[i].ModuleSchema = slices.Clone(c.Tools[i].ModuleSchema)
	}
	c.Requested = slices.Clone(p.Requested)
	c.Granted = slices.Clone(p.Granted)
	c.Config = maps.Clone(p.Config)
	c.Aliases = maps.Clone(p.Aliases)
	c.OwnerConfig = maps.Clone(p.OwnerConfig)
	return &c
}

func decodePin(doc json.RawMessage) (*Pin, error) {
	var p Pin
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return &p, nil
}

// Change is the difference between a module's pin and its files now: what
// `warden tool approve` shows before approving.
type Change struct {
	Module string
	// Old is nil for a module never approved.
	Old, New *Pin
	// Added and Removed are requested capabilities.
	Added, Removed []string
	// ToolsAdded and ToolsRemoved are tool names; ToolsChanged describes
	// tools whose description or input schema changed.
	ToolsAdded, ToolsRemoved, ToolsChanged []string
	// Other lists other changes (ABI, limits, config keys).
	Other []string
}

// Changed reports whether anything differs from the pin.
func (c *Change) Changed() bool {
	return c.Old == nil || c.Old.SHA256 != c.New.SHA256 || c.Old.SidecarSHA256 != c.New.SidecarSHA256 ||
		!c.Old.naming().equal(c.New.naming())
}

// diff compares a pin with a candidate.
func diff(old, cand *Pin) *Change {
	c := &Change{Module: cand.Module, Old: old, New: cand}
	if old == nil {
		c.Added = slices.Clone(cand.Requested)
		for _, t := range cand.Tools {
			c.ToolsAdded = append(c.ToolsAdded, t.Name)
		}
		return c
	}
	c.Added, c.Removed = setDiff(old.Requested, cand.Requested)
	oldTools := map[string]ToolSpec{}
	for _, t := range old.Tools {
		oldTools[t.guest()] = t
	}
	newTools := map[string]bool{}
	for _, t := range cand.Tools {
		newTools[t.guest()] = true
		o, ok := oldTools[t.guest()]
		if !ok {
			c.ToolsAdded = append(c.ToolsAdded, t.Name)
			continue
		}
		if o.Name != t.Name {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: renamed %s → %s", t.guest(), o.Name, t.Name))
		}
		if !jsonEqual(o.moduleSchema(), t.moduleSchema()) {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: the module's input schema %s → %s", t.Name, compactJSON(o.moduleSchema()), compactJSON(t.moduleSchema())))
		}
		if !jsonEqual(o.InputSchema, t.InputSchema) {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: input schema as enforced %s → %s", t.Name, compactJSON(o.InputSchema), compactJSON(t.InputSchema)))
		}
		if o.Description != t.Description {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: description changed", t.Name))
		}
		if o.Export != t.Export {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: export %s → %s", t.Name, o.Export, t.Export))
		}
		if !slices.Equal(o.Overrides, t.Overrides) {
			c.ToolsChanged = append(c.ToolsChanged, fmt.Sprintf("%s: overridden by the sidecar: %s → %s", t.Name, orNone(strings.Join(o.Overrides, ", ")), orNone(strings.Join(t.Overrides, ", "))))
		}
	}
	for _, t := range old.Tools {
		if !newTools[t.guest()] {
			c.ToolsRemoved = append(c.ToolsRemoved, t.Name)
		}
	}
	if old.ABI != cand.ABI {
		c.Other = append(c.Other, fmt.Sprintf("abi %s → %s", old.ABI, cand.ABI))
	}
	if old.Limits != cand.Limits {
		c.Other = append(c.Other, fmt.Sprintf("limits %s → %s", old.Limits, cand.Limits))
	}
	if !mapsEqual(old.Config, cand.Config) {
		c.Other = append(c.Other, "config changed")
	}
	if old.InputFrom != cand.InputFrom || old.Output != cand.Output {
		c.Other = append(c.Other, fmt.Sprintf("input %s, output %s → input %s, output %s",
			inputMode(old.InputFrom), orDefault(old.Output), inputMode(cand.InputFrom), orDefault(cand.Output)))
	}
	if old.Prefix != cand.Prefix {
		c.Other = append(c.Other, fmt.Sprintf("prefix %q → %q", old.Prefix, cand.Prefix))
	}
	if !mapsEqual(old.Aliases, cand.Aliases) {
		c.Other = append(c.Other, fmt.Sprintf("aliases %s → %s", aliasText(old.Aliases), aliasText(cand.Aliases)))
	}
	return c
}

// String renders the change for a person, one line per item.
func (c *Change) String() string {
	var b strings.Builder
	if c.Old == nil {
		fmt.Fprintf(&b, "module %s: not approved yet (sha256 %s, %d bytes, abi %s)\n", c.Module, c.New.SHA256, c.New.Size, c.New.ABI)
		fmt.Fprintf(&b, "  limits %s\n", c.New.Limits)
		if len(c.New.Config) > 0 {
			fmt.Fprintf(&b, "  config keys %s\n", strings.Join(slices.Sorted(maps.Keys(c.New.Config)), ", "))
		}
	} else if !c.Changed() {
		fmt.Fprintf(&b, "module %s: unchanged since approved (sha256 %s)\n", c.Module, c.New.SHA256)
	} else {
		fmt.Fprintf(&b, "module %s: changed since approved on %s\n", c.Module, c.Old.ApprovedAt.UTC().Format(time.RFC3339))
		if c.Old.SHA256 != c.New.SHA256 {
			fmt.Fprintf(&b, "  wasm sha256 %s → %s (%d → %d bytes)\n", c.Old.SHA256, c.New.SHA256, c.Old.Size, c.New.Size)
		}
		if c.Old.SidecarSHA256 != c.New.SidecarSHA256 {
			fmt.Fprintf(&b, "  sidecar sha256 %s → %s\n", orNone(c.Old.SidecarSHA256), orNone(c.New.SidecarSHA256))
		}
	}
	for _, s := range c.Added {
		fmt.Fprintf(&b, "  + requests %s\n", s)
	}
	for _, s := range c.Removed {
		fmt.Fprintf(&b, "  - no longer requests %s\n", s)
	}
	for _, s := range c.ToolsAdded {
		fmt.Fprintf(&b, "  + tool %s\n", s)
	}
	for _, s := range c.ToolsRemoved {
		fmt.Fprintf(&b, "  - tool %s\n", s)
	}
	for _, s := range c.ToolsChanged {
		fmt.Fprintf(&b, "  ~ tool %s\n", s)
	}
	for _, s := range c.Other {
		fmt.Fprintf(&b, "  ~ %s\n", s)
	}
	for _, t := range c.New.Tools {
		for _, line := range t.Notes() {
			fmt.Fprintf(&b, "  ! tool %s: %s\n", t.Name, line)
		}
	}
	if c.Old != nil {
		fmt.Fprintf(&b, "  granted (kept): %s\n", orNone(strings.Join(c.Old.Granted, " ")))
	}
	return b.String()
}

func inputMode(from string) string {
	if from == "" {
		return "json"
	}
	return "text from " + from
}

func orDefault(s string) string {
	if s == "" {
		return "auto"
	}
	return s
}

func aliasText(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func setDiff(old, cur []string) (added, removed []string) {
	o := map[string]bool{}
	for _, s := range old {
		o[s] = true
	}
	n := map[string]bool{}
	for _, s := range cur {
		n[s] = true
		if !o[s] {
			added = append(added, s)
		}
	}
	for _, s := range old {
		if !n[s] {
			removed = append(removed, s)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

func jsonEqual(a, b json.RawMessage) bool { return compactJSON(a) == compactJSON(b) }

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
