package warden

import (
	"time"
)

// Call calls the core tool named tool with args (nil, a JSON object as
// json.RawMessage/[]byte, or a value that marshals to one) through warden's
// gate. The error is non-nil only when there is no envelope (bad arguments
// on the guest side, no host, a malformed answer); a tool failure is an
// envelope with Success false — see [Envelope.Err].
func Call(tool string, args any) (Envelope, error) {
	req, err := appendRequest(requestBuffer(), tool, args)
	if err != nil {
		return Envelope{}, err
	}
	return roundTrip(req)
}

// ReadFile reads a text file through the fs_read core tool (needs
// fs.read on the path, in both the run's and the tool's grants).
func ReadFile(path string) (string, error) {
	e, err := Call("fs_read", map[string]any{"path": path})
	if err != nil {
		return "", err
	}
	if err := e.Err(); err != nil {
		return "", err
	}
	return e.Output, nil
}

// WriteMemory stores value under ns/key through the write_memory core tool
// (needs memory.write:<ns>). An empty ns means warden's default namespace.
// The envelope is returned too, for its warnings (e.g. an overwrite).
func WriteMemory(ns, key, value string) (Envelope, error) {
	args := map[string]any{"key": key, "value": value}
	if ns != "" {
		args["namespace"] = ns
	}
	e, err := Call("write_memory", args)
	if err != nil {
		return e, err
	}
	return e, e.Err()
}

// MemoryHit is one query_memory result.
type MemoryHit struct {
	Namespace string    `json:"namespace"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Score     float64   `json:"score"`
	Updated   time.Time `json:"updated"`
}

// QueryMemory searches warden's memory through the query_memory core tool
// (needs memory.read:<ns>). An empty ns searches every namespace the grants
// allow reading.
func QueryMemory(query, ns string) ([]MemoryHit, error) {
	args := map[string]any{"query": query}
	if ns != "" {
		args["namespace"] = ns
	}
	e, err := Call("query_memory", args)
	if err != nil {
		return nil, err
	}
	if err := e.Err(); err != nil {
		return nil, err
	}
	var data struct {
		Results []MemoryHit `json:"results"`
	}
	if err := e.DecodeData(&data); err != nil {
		return nil, err
	}
	return data.Results, nil
}

// SystemInfo returns the data of `system {"operation":"get_info"}` (needs
// system.info).
func SystemInfo() (map[string]any, error) {
	e, err := Call("system", map[string]any{"operation": "get_info"})
	if err != nil {
		return nil, err
	}
	if err := e.Err(); err != nil {
		return nil, err
	}
	var data map[string]any
	if err := e.DecodeData(&data); err != nil {
		return nil, err
	}
	return data, nil
}

// Args decodes the export's input (the tool's JSON arguments) into v, a
// pointer, strictly: see [DecodeArgs].
func Args(v any) error {
	in, err := readInput()
	if err != nil {
		return err
	}
	return DecodeArgs(in, v)
}

// Return sets v as the export's output (a string or []byte as is, anything
// else as JSON) and returns 0, the export's success code:
//
//	return warden.Return(result)
//
// If v cannot be encoded it returns [Fail] of the error instead.
func Return(v any) int32 {
	b, err := EncodeOutput(v)
	if err != nil {
		return Fail(err)
	}
	writeOutput(b)
	return 0
}

// Fail sets err as the export's error (Extism's error_set) and returns 1,
// the export's failure code. warden reports it as a TOOL_ERROR whose message
// is err's text.
func Fail(err error) int32 {
	if err == nil {
		err = errUnknown
	}
	setError(err.Error())
	return 1
}

type errString string

func (e errString) Error() string { return string(e) }

const errUnknown = errString("failed")

// Config returns the sidecar's config value for key (Extism's config_get).
func Config(key string) (string, bool) {
	return config(key)
}
