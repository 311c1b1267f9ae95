package wasmtool

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// envRefPrefix marks an owner config value read from warden's environment
// at each call: KEY=env:VAR.
const envRefPrefix = "env:"

var envVarName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// EnvRef returns the variable an owner config value refers to
// ("env:VAR"), if it is one.
func EnvRef(value string) (string, bool) {
	v, ok := strings.CutPrefix(value, envRefPrefix)
	return v, ok && envVarName.MatchString(v)
}

// ConfigEntry is one config key of a module, as `warden tool inspect`
// shows it: never a secret's value.
type ConfigEntry struct {
	Key string `json:"key"`
	// Source is "sidecar", "owner" (a value set with `warden tool
	// config`) or "owner-env" (read from the environment at each call).
	Source string `json:"source"`
	// Value is shown for sidecar and owner values; Env names the
	// variable of an owner-env key.
	Value string `json:"value,omitempty"`
	Env   string `json:"env,omitempty"`
}

// configEntries lists p's config keys, the owner's winning over the
// sidecar's.
func configEntries(p *Pin) []ConfigEntry {
	out := []ConfigEntry{}
	for _, k := range slices.Sorted(maps.Keys(p.Config)) {
		if _, ok := p.OwnerConfig[k]; !ok {
			out = append(out, ConfigEntry{Key: k, Source: "sidecar", Value: p.Config[k]})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.OwnerConfig)) {
		v := p.OwnerConfig[k]
		if name, ok := EnvRef(v); ok {
			out = append(out, ConfigEntry{Key: k, Source: "owner-env", Env: name})
		} else {
			out = append(out, ConfigEntry{Key: k, Source: "owner", Value: v})
		}
	}
	slices.SortFunc(out, func(a, b ConfigEntry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// SecretEnv lists the environment variables the owner's config of the
// approved modules reads (KEY=env:VAR), sorted: warden registers their
// values with its redactor at start, so a guest that echoes one is masked
// wherever the gate records it.
func SecretEnv(statuses []Status) []string {
	var out []string
	for _, st := range statuses {
		if st.Pin == nil {
			continue
		}
		for _, v := range st.Pin.OwnerConfig {
			if name, ok := EnvRef(v); ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// SetConfig sets the owner's config of module name: each KEY=VALUE of set
// (VALUE "env:VAR" reads VAR from warden's environment at each call), then
// removes the keys of unset. The pin keeps the reference, never the
// variable's value.
func (h *Host) SetConfig(ctx context.Context, name string, set map[string]string, unset []string) (*Pin, error) {
	p, err := h.pin(ctx, name)
	if err != nil {
		return nil, h.notInstalled(name, err)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		v := set[k]
		if !configKey.MatchString(k) {
			return nil, fmt.Errorf("config key %q: use 1-128 letters, digits, _, . or -", k)
		}
		if strings.HasPrefix(v, envRefPrefix) {
			if _, ok := EnvRef(v); !ok {
				return nil, fmt.Errorf("config %s=%s: env:VAR needs a variable name (letters, digits, _; not starting with a digit)", k, v)
			}
		}
		if len(v) > 4096 {
			return nil, fmt.Errorf("config %s: the value is over 4096 bytes", k)
		}
	}
	for _, k := range unset {
		if _, ok := p.OwnerConfig[k]; !ok {
			return nil, fmt.Errorf("%s has no owner config key %q (keys: %s)", name, k, orNone(strings.Join(slices.Sorted(maps.Keys(p.OwnerConfig)), ", ")))
		}
	}
	if p.OwnerConfig == nil {
		p.OwnerConfig = map[string]string{}
	}
	maps.Copy(p.OwnerConfig, set)
	for _, k := range unset {
		delete(p.OwnerConfig, k)
	}
	if len(p.OwnerConfig) == 0 {
		p.OwnerConfig = nil
	}
	return p, h.putPin(ctx, p)
}

// config is what the guest's config_get serves for one call: the sidecar
// config; "env:NAME" for each environment variable granted to the tool
// that the run's grants allow too; and the owner's config, whose env:VAR
// values are read now — only when env:VAR is granted to the tool and
// allowed by the run, and only when the gate would mask the value
// wherever it records it. What is left out is said in a warning; a
// secret the gate would not mask fails the call.
func (t *Tool) config(gate *gate.Gate, effective capability.Set) (map[string]string, []string, *tool.Error) {
	cfg := make(map[string]string, len(t.pin.Config)+len(t.pin.OwnerConfig))
	maps.Copy(cfg, t.pin.Config)
	for _, s := range t.pin.Granted {
		g, err := capability.Parse(s)
		if err != nil || g.Kind() != capability.Env {
			continue
		}
		name := g.Scope()
		if !effective.Allows(capability.Need{Kind: capability.Env, Resource: name}) {
			continue
		}
		if v, ok := os.LookupEnv(name); ok {
			cfg["env:"+name] = v
		}
	}
	var warnings []string
	for _, k := range slices.Sorted(maps.Keys(t.pin.OwnerConfig)) {
		v := t.pin.OwnerConfig[k]
		name, ok := EnvRef(v)
		if !ok {
			cfg[k] = v
			continue
		}
		delete(cfg, k) // never the sidecar's value in place of the owner's secret
		if !effective.Allows(capability.Need{Kind: capability.Env, Resource: name}) {
			warnings = append(warnings, fmt.Sprintf("config %s was not given to the tool: it reads env:%s, which is not granted to %s and the run (`warden tool grant %s env:%s`)", k, name, t.module, t.module, name))
			continue
		}
		val, set := os.LookupEnv(name)
		if !set || val == "" {
			warnings = append(warnings, fmt.Sprintf("config %s was not given to the tool: %s is not set in warden's environment", k, name))
			continue
		}
		if gate == nil || !gate.Conceals(val) {
			return nil, nil, tool.Errorf(tool.CodeInternal, "a secret must be 8 characters or more; after `warden tool config` restart a running `warden mcp serve`",
				"config %s (env:%s) was not given to the tool: warden could not mask its value in what it records", k, name)
		}
		cfg[k] = val
	}
	return cfg, warnings, nil
}
