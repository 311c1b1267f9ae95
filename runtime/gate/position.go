package gate

import (
	"github.com/goccy/go-yaml/ast"

	"github.com/wardenrt/warden/runtime/decode"
)

// PositionError is a problem in a file someone else wrote — a policy, a
// wasm tool's sidecar, a workflow — located by line and column where known
// (Line 0: the file as a whole).
type PositionError = decode.Error

// YAMLPosition is the line and column of the YAML value at path (a
// goccy/go-yaml path such as "$.steps[2].tool") in file: see
// decode.Position.
func YAMLPosition(file *ast.File, path string) (int, int) { return decode.Position(file, path) }

// YAMLError locates a goccy/go-yaml decoding error in source.
func YAMLError(source string, err error) *PositionError { return decode.YAMLError(source, err) }
