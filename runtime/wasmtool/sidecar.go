package wasmtool

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/wardenrt/warden/runtime"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
)

// The three kinds of module (SPEC §6).
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

	// schema is InputSchema as JSON.
	schema json.RawMessage
}

// Limits bound every call of a module's tools. Zero fields take defaults.
type Limits struct {
	MemoryMB       int `yaml:"memory_mb" json:"memory_mb"`
	TimeoutMS      int `yaml:"timeout_ms" json:"timeout_ms"`
	MaxOutputBytes int `yaml:"max_output_bytes" json:"max_output_bytes"`
}

// export is the Extism export the sidecar names, "call" by default.
func (s *Sidecar) export() string {
	if s.Export == "" {
		return "call"
	}
	return s.Export
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
var configKey = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// SidecarError is a problem in a sidecar, located by line and column
// when the YAML says where.
type SidecarError = runtime.PositionError

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
	if sc.Name != "" && !runtime.ValidToolName(sc.Name) {
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
