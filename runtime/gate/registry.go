package gate

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/wardenrt/warden/runtime/tool"
)

// ValidToolName reports whether name is valid as a tool name (and as an
// OpenAI function name): ^[a-zA-Z0-9_-]{1,64}$, checked by hand (compiling
// that pattern cost every process that builds a registry more than
// checking all its names).
func ValidToolName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Registry is the explicit list of enabled tools. It is built in one place
// (cmd/warden) so that every power warden has is visible there; there is no
// global registry and no init-time registration.
type Registry struct {
	tools   map[string]*entry
	aliases map[string]string
}

type entry struct {
	tool tool.Tool
	// spec is the tool's head (tool.HeadOf): its InputSchema is empty
	// when the tool derives it on first use; Specs asks the tool.
	spec   tool.Spec
	schema *tool.Schema
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*entry{}, aliases: map[string]string{}}
}

// Register adds tools. A name that is invalid, already taken, or a schema
// that does not compile or is not closed is refused with an error naming it.
// The schema a typed tool derives from its argument struct (tool.Adapt) is
// derived and compiled when the tool is first called instead: a schema of
// warden's own types, every one of which tests compile; should one not
// compile, every call of the tool is refused (tool.DeferOwnSchema).
func (r *Registry) Register(tools ...tool.Tool) error {
	for _, t := range tools {
		spec, deferred := tool.HeadOf(t)
		if !ValidToolName(spec.Name) {
			return fmt.Errorf("tool name %q is invalid: use 1-64 letters, digits, _ or -", spec.Name)
		}
		if r.taken(spec.Name) {
			return fmt.Errorf("tool name %q is already taken: rename one of the two tools", spec.Name)
		}
		if _, ok := t.(tool.Previewer); !ok && !spec.ReadOnly {
			return fmt.Errorf("tool %s changes things (its spec is not read-only) but has no Preview", spec.Name)
		}
		var sch *tool.Schema
		if deferred {
			sch = tool.DeferOwnSchema(spec.Name, func() json.RawMessage { return t.Spec().InputSchema })
		} else {
			var err error
			if sch, err = tool.CompileSchema(spec.Name, spec.InputSchema); err != nil {
				return err
			}
		}
		r.tools[spec.Name] = &entry{tool: t, spec: spec, schema: sch}
	}
	return nil
}

// Alias makes alias another name for an already registered tool (e.g. `run`
// for `shell`).
func (r *Registry) Alias(alias, target string) error {
	if !ValidToolName(alias) {
		return fmt.Errorf("tool alias %q is invalid", alias)
	}
	if r.taken(alias) {
		return fmt.Errorf("tool name %q is already taken", alias)
	}
	if _, ok := r.tools[target]; !ok {
		return fmt.Errorf("alias %q: no tool %q", alias, target)
	}
	r.aliases[alias] = target
	return nil
}

// Has reports whether name is a registered tool or alias.
func (r *Registry) Has(name string) bool { return r.taken(name) }

func (r *Registry) taken(name string) bool {
	_, t := r.tools[name]
	_, a := r.aliases[name]
	return t || a
}

func (r *Registry) lookup(name string) (*entry, bool) {
	if target, ok := r.aliases[name]; ok {
		name = target
	}
	e, ok := r.tools[name]
	return e, ok
}

// Lookup returns the tool registered under name (or an alias of it).
func (r *Registry) Lookup(name string) (tool.Tool, bool) {
	e, ok := r.lookup(name)
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// Names returns a tool's name followed by its aliases, so a policy rule
// written for either matches the tool whichever name the caller used.
func (r *Registry) Names(name string) []string {
	if target, ok := r.aliases[name]; ok {
		name = target
	}
	names := []string{name}
	for alias, target := range r.aliases {
		if target == name {
			names = append(names, alias)
		}
	}
	sort.Strings(names[1:])
	return names
}

// Specs returns every tool's spec, sorted by name.
func (r *Registry) Specs() []tool.Spec {
	out := make([]tool.Spec, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, e.tool.Spec())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of registered tools (aliases not counted).
func (r *Registry) Len() int { return len(r.tools) }

// CheckArgs checks arguments for tool name as the gate's first step does
// (strict decoding, then the tool's schema), without calling anything: a
// workflow's literal arguments are checked when it is validated.
func (r *Registry) CheckArgs(name string, args []byte) error {
	e, ok := r.lookup(name)
	if !ok {
		return tool.Errorf(tool.CodeUnknownTool, "list the tools with `warden tools`", "no tool named %q", name)
	}
	value, _, derr := tool.DecodeArgs(args)
	if derr != nil {
		return derr
	}
	if verr := e.schema.Validate(value); verr != nil {
		return verr
	}
	return nil
}
