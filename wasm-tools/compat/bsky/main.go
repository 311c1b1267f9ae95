//go:build wasip1

// Command bsky reproduces the shape of servlets published for other hosts
// (mcp.run style: describe + call), as warden meets them: input schemas
// left open (no additionalProperties: false), an open nested object, a
// tool named search (as a core tool is), a tool whose name is valid for MCP
// but not as an OpenAI function name (feed.timeline), a draft-07 schema
// combining objects with allOf and $ref, and the common mistakes of a
// required list placed inside properties and draft-03 "required": true. It decodes its
// arguments the lenient way published guests do (encoding/json: unknown
// fields ignored, names matched case-insensitively), so warden's own
// strictness is what refuses them.
//
// Each tool answers with what it received, including the tool name the
// call gave it, so a test sees what reached the guest.
package main

import (
	"encoding/json"

	"github.com/extism/go-pdk"
)

func main() {}

const describeJSON = `{"tools":[
 {"name":"search","description":"Search posts by text, optionally filtered.",
  "inputSchema":{"type":"object","properties":{
    "q":{"type":"string","description":"the text to search for"},
    "limit":{"type":"integer","minimum":1,"maximum":100},
    "filters":{"type":"object","properties":{"lang":{"type":"string"},"since":{"type":"string"}}},
    "extra":{"type":"object","description":"free-form options"}},
   "required":["q"]}},
 {"name":"get_profile","description":"Get a user's profile by handle.",
  "inputSchema":{"type":"object","properties":{
    "handle":{"type":"string","description":"the user's handle"},
    "required":["handle"]}}},
 {"name":"feed.timeline","description":"Read a feed, a page at a time.",
  "inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
   "properties":{"feed":{"type":"string","required":true}},
   "allOf":[{"$ref":"#/definitions/page"}],
   "definitions":{"page":{"type":"object","properties":{"cursor":{"type":"string"},"limit":{"type":"integer"}}}}}}
]}`

//go:wasmexport describe
func describe() int32 {
	pdk.OutputString(describeJSON)
	return 0
}

type callInput struct {
	Params struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"params"`
}

type args struct {
	Q       string         `json:"q"`
	Limit   int            `json:"limit"`
	Filters map[string]any `json:"filters"`
	Extra   map[string]any `json:"extra"`
	Handle  string         `json:"handle"`
	Feed    string         `json:"feed"`
	Cursor  string         `json:"cursor"`
}

//go:wasmexport call
func call() int32 {
	var in callInput
	if err := json.Unmarshal(pdk.Input(), &in); err != nil {
		pdk.SetError(err)
		return 1
	}
	raw, _ := json.Marshal(in.Params.Arguments)
	var a args
	_ = json.Unmarshal(raw, &a) // lenient, as published guests are
	var text string
	switch in.Params.Name {
	case "search":
		b, _ := json.Marshal(map[string]any{"tool": in.Params.Name, "q": a.Q, "limit": a.Limit, "filters": a.Filters, "extra": a.Extra,
			"posts": []string{"first post about " + a.Q}})
		text = string(b)
	case "get_profile":
		b, _ := json.Marshal(map[string]any{"tool": in.Params.Name, "handle": a.Handle, "name": "Profile of " + a.Handle})
		text = string(b)
	case "feed.timeline":
		b, _ := json.Marshal(map[string]any{"tool": in.Params.Name, "feed": a.Feed, "cursor": a.Cursor, "limit": a.Limit})
		text = string(b)
	default:
		return result("unknown tool "+in.Params.Name, true)
	}
	return result(text, false)
}

func result(text string, isError bool) int32 {
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": isError})
	pdk.Output(b)
	return 0
}
