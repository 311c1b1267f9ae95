// Package workflow is warden's workflow file (schema v1): which tools to
// call with what arguments, under which grants, in which order — a run
// that needs no model. This file holds the format and its strict parsing;
// validate.go the checks that report every problem with its line and
// column; ref.go the `${{ … }}` references, which substitute values and
// never execute code.
package workflow

import (
	_ "embed"
	"time"

	"github.com/wardenrt/warden/runtime/decode"
)

// Bounds of the format.
const (
	// MaxForeach bounds the items a step iterates over.
	MaxForeach = 256
	// DefaultMaxDepth bounds how deep workflows nest.
	DefaultMaxDepth = 4
	// MaxRetries bounds a step's retry attempts.
	MaxRetries = 10
	// MaxRetryDelay and MaxTimeout bound a step's durations.
	MaxRetryDelay = 5 * time.Minute
	MaxTimeout    = time.Hour
)

// Workflow is one workflow file.
type Workflow struct {
	Version     int              `yaml:"version" json:"version"`
	Name        string           `yaml:"name" json:"name"`
	Description string           `yaml:"description" json:"description,omitempty"`
	Params      map[string]Param `yaml:"params" json:"params,omitempty"`
	// Grants are the grants the workflow needs; it runs with the policy's
	// grants ∩ these, and a run reports any the policy does not give
	// before its first step.
	Grants  []string          `yaml:"grants" json:"grants,omitempty"`
	Steps   []Step            `yaml:"steps" json:"steps"`
	Outputs map[string]string `yaml:"outputs" json:"outputs,omitempty"`

	// Source names the file (for messages); Digest is its sha256 (a run
	// records it, and resume refuses a file that changed).
	Source string `yaml:"-" json:"-"`
	Digest string `yaml:"-" json:"-"`
	// positions of the steps' fields, by path ("$.steps[2].tool").
	pos func(path string) (int, int)
}

// Param is a typed parameter.
type Param struct {
	Type        string `yaml:"type" json:"type"` // string | integer | number | boolean | array | object
	Description string `yaml:"description" json:"description,omitempty"`
	Default     any    `yaml:"default" json:"default,omitempty"`
	Required    bool   `yaml:"required" json:"required,omitempty"`
}

// Step is one step: exactly one of Tool, Agent and Workflow.
type Step struct {
	ID   string `yaml:"id" json:"id"`
	Name string `yaml:"name" json:"name,omitempty"`
	// Tool is a tool to call with Args.
	Tool string `yaml:"tool" json:"tool,omitempty"`
	// Agent is a task for the model (the agent loop, under the
	// workflow's grants).
	Agent string `yaml:"agent" json:"agent,omitempty"`
	// Workflow is another workflow file (relative to this one), run with
	// Params.
	Workflow string         `yaml:"workflow" json:"workflow,omitempty"`
	Args     map[string]any `yaml:"args" json:"args,omitempty"`
	Params   map[string]any `yaml:"params" json:"params,omitempty"`
	// When is a condition (`${{ steps.a.success && params.deploy }}`); the
	// step is skipped when it is false.
	When string `yaml:"when" json:"when,omitempty"`
	// Foreach is a list, or a reference to one; the step runs once per
	// item (at most MaxForeach), with `${{ item }}` in its args.
	Foreach any `yaml:"foreach" json:"foreach,omitempty"`
	// Retry re-runs a failed step.
	Retry *Retry `yaml:"retry" json:"retry,omitempty"`
	// Timeout bounds the step ("30s").
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
	// ContinueOnError lets the workflow go on after the step fails.
	ContinueOnError bool `yaml:"continue_on_error" json:"continue_on_error,omitempty"`
	// DryRun previews the step instead of running it.
	DryRun bool `yaml:"dry_run" json:"dry_run,omitempty"`
}

// Retry says how often and how long apart a failed step is tried again.
type Retry struct {
	Attempts int    `yaml:"attempts" json:"attempts"`
	Delay    string `yaml:"delay" json:"delay,omitempty"`
}

// Kind is what a step runs: "tool", "agent" or "workflow".
func (s *Step) Kind() string {
	switch {
	case s.Tool != "":
		return "tool"
	case s.Agent != "":
		return "agent"
	case s.Workflow != "":
		return "workflow"
	}
	return ""
}

// MaxFileBytes bounds a workflow file, and MaxTotalBytes a workflow with
// every file it includes: each one parsed stays in memory while the
// whole is checked. MaxTotalTokens bounds what parsing them all may cost:
// a file may hold up to decode.DefaultMaxTokens YAML tokens, and the
// workflow with its includes twice that (bytes alone do not bound the
// parse: 200 dense files of 19 KB once took 27 s and 1.5 GB).
const (
	MaxFileBytes   = decode.DefaultMaxBytes
	MaxTotalBytes  = 4 * MaxFileBytes
	MaxTotalTokens = 2 * decode.DefaultMaxTokens
)

//go:embed schema.json
var schemaJSON []byte

// Schema returns the JSON Schema of the format (`warden workflow schema`).
func Schema() []byte { return append([]byte(nil), schemaJSON...) }
