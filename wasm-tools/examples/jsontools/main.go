// Command jsontools is an MCP-style servlet (exports "describe" and "call")
// exposing two pure tools, json_query and json_format. warden lists each
// tool describe returns as a warden tool of its own.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

// toolDef is one entry of describe's output.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

var tools = []toolDef{
	{
		Name: "json_query",
		Description: "Select a value from a JSON document with a simple path: dotted keys and array indexes, " +
			`e.g. items[0].name, items.0.name, $.a["odd.key"], items[-1] (from the end). An empty path selects the whole document. ` +
			"Returns the selected value as indented JSON.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"json":{"type":"string","description":"The JSON document."},` +
			`"path":{"type":"string","description":"The path to select."}},` +
			`"required":["json","path"],"additionalProperties":false}`),
	},
	{
		Name:        "json_format",
		Description: "Reformat a JSON document, keeping key order and number text: indent 0 compacts it, 1-8 indents by that many spaces (default 2).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"json":{"type":"string","description":"The JSON document."},` +
			`"indent":{"type":"integer","minimum":0,"maximum":8,"description":"Spaces per level; 0 = compact (default 2)."}},` +
			`"required":["json"],"additionalProperties":false}`),
	},
}

//go:wasmexport describe
func describe() int32 {
	return warden.Return(map[string]any{"tools": tools})
}

// callInput is the servlet convention's call input.
type callInput struct {
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type callResult struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError"`
}

//go:wasmexport call
func call() int32 {
	var in callInput
	if err := warden.Args(&in); err != nil {
		// Not a well-formed call: a protocol error, not a tool result.
		return warden.Fail(err)
	}
	text, err := dispatch(in.Params.Name, in.Params.Arguments)
	if err != nil {
		// A tool failure is a result the model sees.
		return warden.Return(callResult{Content: []content{{"text", err.Error()}}, IsError: true})
	}
	return warden.Return(callResult{Content: []content{{"text", text}}})
}

func dispatch(name string, raw json.RawMessage) (string, error) {
	switch name {
	case "json_query":
		var a struct {
			JSON string `json:"json"`
			Path string `json:"path"`
		}
		if err := warden.DecodeArgs(raw, &a); err != nil {
			return "", err
		}
		return query(a.JSON, a.Path)
	case "json_format":
		var a struct {
			JSON   string `json:"json"`
			Indent *int   `json:"indent"`
		}
		if err := warden.DecodeArgs(raw, &a); err != nil {
			return "", err
		}
		indent := 2
		if a.Indent != nil {
			indent = *a.Indent
		}
		return format(a.JSON, indent)
	}
	return "", fmt.Errorf("unknown tool %q (this servlet has json_query and json_format)", name)
}

func format(doc string, indent int) (string, error) {
	if indent < 0 || indent > 8 {
		return "", errors.New("indent must be between 0 and 8")
	}
	var buf bytes.Buffer
	if indent == 0 {
		if err := json.Compact(&buf, []byte(doc)); err != nil {
			return "", fmt.Errorf("not valid JSON: %w", err)
		}
		return buf.String(), nil
	}
	if err := json.Indent(&buf, []byte(doc), "", spaces[:indent]); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	return buf.String(), nil
}

const spaces = "        "
