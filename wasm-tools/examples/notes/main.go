// Command notes is a warden wasm tool (Extism plugin, export "call") that
// keeps notes in warden's memory, namespace "notes", by calling the
// write_memory and query_memory core tools through warden_call. Those calls
// go through warden's gate with the run's grants ∩ this tool's grants, so
// without memory.write:notes / memory.read:notes they come back as
// CAPABILITY_DENIED, which this tool reports as its error.
package main

import (
	"errors"
	"strings"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

const namespace = "notes"

type args struct {
	Op    string `json:"op"`
	Key   string `json:"key"`
	Text  string `json:"text"`
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

// Added is the output of op "add".
type Added struct {
	Namespace string   `json:"namespace"`
	Key       string   `json:"key"`
	Warnings  []string `json:"warnings"`
}

// Found is the output of op "search".
type Found struct {
	Query string `json:"query"`
	Notes []Note `json:"notes"`
}

// Note is one search result.
type Note struct {
	Key   string  `json:"key"`
	Text  string  `json:"text"`
	Score float64 `json:"score"`
}

//go:wasmexport call
func call() int32 {
	var a args
	if err := warden.Args(&a); err != nil {
		return warden.Fail(err)
	}
	switch a.Op {
	case "add":
		if strings.TrimSpace(a.Key) == "" || a.Text == "" {
			return warden.Fail(errors.New(`op "add" needs key and text`))
		}
		e, err := warden.WriteMemory(namespace, a.Key, a.Text)
		if err != nil {
			return warden.Fail(err)
		}
		return warden.Return(Added{Namespace: namespace, Key: a.Key, Warnings: append([]string{}, e.Warnings...)})
	case "search":
		if strings.TrimSpace(a.Query) == "" {
			return warden.Fail(errors.New(`op "search" needs query`))
		}
		hits, err := warden.QueryMemory(a.Query, namespace)
		if err != nil {
			return warden.Fail(err)
		}
		limit := 10
		if a.Limit != nil {
			limit = min(max(*a.Limit, 1), 100)
		}
		out := Found{Query: a.Query, Notes: []Note{}}
		for _, h := range hits {
			if len(out.Notes) == limit {
				break
			}
			out.Notes = append(out.Notes, Note{Key: h.Key, Text: h.Value, Score: h.Score})
		}
		return warden.Return(out)
	}
	return warden.Fail(errors.New(`op must be "add" or "search"`))
}
