package wasmtool

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
)

// The three kinds of module (wasm-tools/README.md).
const (
	// ABIExtism is an Extism plugin with a NAME.tool.yaml sidecar: one
	// export called with the JSON arguments as input.
	ABIExtism = "extism"
	// ABIServlet is an MCP-style servlet: describe lists its tools, call
	// runs one. A sidecar is optional (capabilities, limits, config).
	ABIServlet = "servlet"
	// ABICommand is a WASI command: _start, arguments on stdin, result on
	// stdout, exit code 0 for success.
	ABICommand = "wasi-command"
)

// Limit defaults and ceilings for sidecar limits.
const (
	DefaultMemoryMB       = 64
	MaxMemoryMB           = 1024
	DefaultTimeoutMS      = 10_000
	MaxTimeoutMS          = 600_000
	DefaultMaxOutputBytes = 1 << 20
	MaxMaxOutputBytes     = 16 << 20
)

// Sidecar is NAME.tool.yaml, the description of a module its author ships
// beside it. Everything in it is a request: capabilities are granted by the
// owner, never by the sidecar.
type Sidecar struct {
	Name         string            `yaml:"name"`
	Description  string            `yaml:"description"`
	ABI          string            `yaml:"abi"`
	Export       string            `yaml:"export"`
	InputSchema  any               `yaml:"input_schema"`
	Capabilities []string          `yaml:"capabilities"`
	Limits       Limits            `yaml:"limits"`
	Config       map[string]string `yaml:"config"`
	// Input says how the arguments become an Extism plugin's input (or a
	// WASI command's stdin): json (the default: the arguments object) or
	// {from: ARG} (the string argument ARG, as raw bytes).
	Input Input `yaml:"input"`
	// Output says how the output is read: json (must be JSON; becomes the
	// result's data), text (never parsed), or unset (a JSON object is
	// also the data, anything else is text).
	Output string `yaml:"output"`
	// Tools overrides the description or input schema of a servlet's tools,
	// keyed by the name its describe gives.
	Tools map[string]ToolOverride `yaml:"tools"`

	// schema is InputSchema as JSON.
	schema json.RawMessage
}

// Output modes.
const (
	OutputJSON = "json"
	OutputText = "text"
)

// Input is the sidecar's input: "json", or {from: ARG}.
type Input struct {
	// From names the string argument passed as the raw input; "" means
	// the JSON arguments.
	From string
}

// UnmarshalYAML reads `input: json` or `input: {from: ARG}`.
func (in *Input) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		if x == "json" {
			in.From = ""
			return nil
		}
	case map[string]any:
		from, ok := x["from"].(string)
		if ok && len(x) == 1 && gate.ValidToolName(from) {
			in.From = from
			return nil
		}
	}
	return fmt.Errorf("input: use json, or {from: ARG} with ARG the name of a string argument (letters, digits, _ or -)")
}

// ToolOverride is the owner's description or input schema for one of a
// servlet's tools, replacing what its describe says.
type ToolOverride struct {
	Description string `yaml:"description"`
	InputSchema any    `yaml:"input_schema"`

	schema json.RawMessage
}

// Limits bound every call of a module's tools. Zero fields take defaults.
type Limits struct {
	MemoryMB       int `yaml:"memory_mb" json:"memory_mb"`
	TimeoutMS      int `yaml:"timeout_ms" json:"timeout_ms"`
	MaxOutputBytes int `yaml:"max_output_bytes" json:"max_output_bytes"`
}

// toolOverrides is the sidecar's per-tool overrides (nil-safe).
func (s *Sidecar) toolOverrides() map[string]ToolOverride {
	if s == nil {
		return nil
	}
	return s.Tools
}

// String renders the limits for a person.
func (l Limits) String() string {
	return fmt.Sprintf("memory %d MiB, timeout %d ms, output %d bytes", l.MemoryMB, l.TimeoutMS, l.MaxOutputBytes)
}

func (l Limits) withDefaults() Limits {
	if l.MemoryMB == 0 {
		l.MemoryMB = DefaultMemoryMB
	}
	if l.TimeoutMS == 0 {
		l.TimeoutMS = DefaultTimeoutMS
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return l
}

// configKey is what a sidecar config key may look like; "env:NAME" keys are
// reserved for granted environment variables.
var configKey = lazyre.New(`^[A-Za-z0-9_.-]{1,128}$`)

// SidecarError is a problem in a sidecar, located by line and column
// when the YAML says where.
type SidecarError = gate.PositionError

// MaxSidecarBytes bounds a sidecar file.
const MaxSidecarBytes = decode.DefaultMaxBytes

// ParseSidecar parses a sidecar strictly and under a budget (see package
// decode: size, aliases, depth, duplicate and unknown keys, wrong types,
// each with line and column) and checks its values.
func ParseSidecar(file string, data []byte) (*Sidecar, error) {
	var sc Sidecar
	if _, err := decode.YAML(file, data, &sc, &decode.Limits{MaxBytes: MaxSidecarBytes}); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return &SidecarError{Source: file, Message: fmt.Sprintf(format, args...)}
	}
	if sc.Name != "" && !gate.ValidToolName(sc.Name) {
		return nil, bad("name %q is not a valid tool name: use 1-64 letters, digits, _ or -", sc.Name)
	}
	switch sc.ABI {
	case "", ABIExtism, ABIServlet, ABICommand:
	default:
		return nil, bad("abi %q: use %s, %s or %s", sc.ABI, ABIExtism, ABIServlet, ABICommand)
	}
	if sc.Export != "" && sc.ABI != "" && sc.ABI != ABIExtism {
		return nil, bad("export is for abi %s only", ABIExtism)
	}
	if sc.InputSchema != nil {
		if sc.ABI == ABIServlet {
			return nil, bad("input_schema: a servlet describes its tools' schemas itself")
		}
		raw, err := json.Marshal(sc.InputSchema)
		if err != nil {
			return nil, bad("input_schema: %v", err)
		}
		sc.schema = raw
	}
	if sc.Input.From != "" && sc.ABI == ABIServlet {
		return nil, bad("input: a servlet's call always gets {\"params\":{\"name\",\"arguments\"}}")
	}
	switch sc.Output {
	case "", OutputJSON, OutputText:
		if sc.Output != "" && sc.ABI == ABIServlet {
			return nil, bad("output: a servlet's call always returns {\"content\":[…]}")
		}
	default:
		return nil, bad("output %q: use %s or %s", sc.Output, OutputJSON, OutputText)
	}
	if len(sc.Tools) > 0 && sc.ABI != "" && sc.ABI != ABIServlet {
		return nil, bad("tools: per-tool overrides are for servlets (abi %s); a one-tool module has description and input_schema", ABIServlet)
	}
	if len(sc.Tools) > 0 && sc.InputSchema != nil {
		return nil, bad("tools: a sidecar with per-tool overrides is a servlet's, which has no input_schema of its own")
	}
	for _, name := range slices.Sorted(maps.Keys(sc.Tools)) {
		o := sc.Tools[name]
		if name == "" || len(name) > 128 {
			return nil, bad("tools: %q is not a tool name", name)
		}
		if o.Description == "" && o.InputSchema == nil {
			return nil, bad("tools.%s: give description, input_schema or both", name)
		}
		if o.InputSchema != nil {
			raw, err := json.Marshal(o.InputSchema)
			if err != nil {
				return nil, bad("tools.%s.input_schema: %v", name, err)
			}
			o.schema = raw
		}
		sc.Tools[name] = o
	}
	for _, c := range sc.Capabilities {
		if _, err := capability.Parse(c); err != nil {
			return nil, bad("capabilities: %v", err)
		}
	}
	l := sc.Limits
	switch {
	case l.MemoryMB < 0 || l.MemoryMB > MaxMemoryMB:
		return nil, bad("limits.memory_mb %d: use 1 to %d", l.MemoryMB, MaxMemoryMB)
	case l.TimeoutMS < 0 || l.TimeoutMS > MaxTimeoutMS:
		return nil, bad("limits.timeout_ms %d: use 1 to %d", l.TimeoutMS, MaxTimeoutMS)
	case l.MaxOutputBytes < 0 || l.MaxOutputBytes > MaxMaxOutputBytes:
		return nil, bad("limits.max_output_bytes %d: use 1 to %d", l.MaxOutputBytes, MaxMaxOutputBytes)
	}
	for k := range sc.Config {
		if !configKey.MatchString(k) {
			return nil, bad("config key %q: use letters, digits, _, . or - (keys env:NAME are reserved for granted environment variables)", k)
		}
	}
	return &sc, nil
}
