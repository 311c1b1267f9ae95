package env

import (
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"
)

// JSONFlag lets --json follow any command, not only precede it.
var JSONFlag = &cli.BoolFlag{Name: "json", Usage: "machine-readable output on stdout"}

// WriteJSON writes v to w as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// version is warden's version, as main has it (SetVersion).
var version string

// SetVersion sets the version warden reports (its system tool, the MCP
// server); main sets its own, stamped at build time, before anything runs.
func SetVersion(v string) { version = v }

// Version is the version warden reports.
func Version() string { return version }
