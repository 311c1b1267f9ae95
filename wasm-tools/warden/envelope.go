package warden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// Envelope is the result of every warden tool call (docs/envelope.md).
type Envelope struct {
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id"`
	Success    bool            `json:"success"`
	DryRun     bool            `json:"dry_run"`
	Output     string          `json:"output"`
	Data       json.RawMessage `json:"data,omitempty"`
	Warnings   []string        `json:"warnings"`
	Error      *Error          `json:"error,omitempty"`
	DurationMS int64           `json:"duration_ms"`
}

// Error is the error object of a failed envelope. It implements error, so a
// caller can use errors.As to get at the code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// MissingGrants lists, on CAPABILITY_DENIED, the grants that would
	// allow the call (fs.write:notes/a.txt, exec:git), for the guest to
	// pass on in its own words.
	MissingGrants []string `json:"missing_grants,omitempty"`
	// Approval says, on APPROVAL_REQUIRED, which rule asked for an
	// approval and why none was given.
	Approval *Approval `json:"approval,omitempty"`
}

// Approval is the approval a refused call needed (docs/envelope.md).
type Approval struct {
	Rule   string `json:"rule,omitempty"`
	Mode   string `json:"mode"`
	Failed string `json:"failed,omitempty"`
}

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Err returns nil for a successful envelope and an *Error otherwise (with
// code TOOL_ERROR when the host sent a failure without an error object).
func (e Envelope) Err() error {
	if e.Success {
		return nil
	}
	if e.Error == nil {
		return &Error{Code: "TOOL_ERROR", Message: fmt.Sprintf("%s failed without an error object", e.Tool)}
	}
	return e.Error
}

// DecodeData decodes the envelope's data into v. Unknown fields are
// ignored: core tools may add fields to their data over time.
func (e Envelope) DecodeData(v any) error {
	if len(e.Data) == 0 || string(e.Data) == "null" {
		return fmt.Errorf("warden: %s returned no data", e.Tool)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("warden: %s data: %w", e.Tool, err)
	}
	return nil
}

// Request is what a guest sends to warden_call.
type Request struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Transport errors (not tool failures, which are envelopes).
var (
	// ErrNotWasm is returned by every host call in a native (non-wasip1)
	// build: there is no host to call.
	ErrNotWasm = errors.New("warden: no wasm host (this build is not GOOS=wasip1; the stub exists only for native unit tests)")
	// ErrNoEnvelope is returned when the host answered warden_call with
	// offset 0 or an empty block.
	ErrNoEnvelope = errors.New("warden: warden_call returned no envelope")
)

// EncodeRequest builds the warden_call request for tool with args. args may
// be nil (sent as {}), a json.RawMessage or []byte holding a JSON object, or
// any value that marshals to a JSON object.
func EncodeRequest(tool string, args any) ([]byte, error) {
	return appendRequest(nil, tool, args)
}

// appendRequest is EncodeRequest appending the request to dst.
func appendRequest(dst []byte, tool string, args any) ([]byte, error) {
	if tool == "" {
		return nil, errors.New("warden: empty tool name")
	}
	fresh := dst == nil
	if fresh {
		dst = make([]byte, 0, 128+len(tool))
	}
	if req, ok := appendRequestFast(dst[:0], tool, args); ok {
		return req, nil
	}
	var raw json.RawMessage
	switch a := args.(type) {
	case nil:
		raw = json.RawMessage(`{}`)
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("warden: arguments of %s: %w", tool, err)
		}
		raw = b
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("warden: arguments of %s must be a JSON object", tool)
	}
	req, err := json.Marshal(Request{Tool: tool, Args: raw})
	if err != nil || fresh {
		return req, err
	}
	return append(dst[:0], req...), nil
}

// DecodeEnvelope parses the host's answer to warden_call.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if len(bytes.TrimSpace(b)) == 0 {
		return e, ErrNoEnvelope
	}
	if fast, ok := decodeEnvelopeFast(b); ok {
		e = fast
	} else if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("warden: malformed envelope: %w", err)
	}
	if !e.Success && e.Error == nil && e.Tool == "" {
		return e, fmt.Errorf("warden: malformed envelope: %.100q", b)
	}
	return e, nil
}

// DecodeArgs decodes a JSON object into v (a pointer) strictly: unknown
// fields, field names that differ from the JSON names only by case (which
// encoding/json would accept), and trailing data are errors. Empty input
// decodes as {}.
func DecodeArgs(data []byte, v any) error {
	rt := reflect.TypeOf(v)
	if rt == nil || rt.Kind() != reflect.Pointer {
		return fmt.Errorf("warden: DecodeArgs needs a pointer, got %T", v)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte(`{}`)
	}
	var generic any
	gd := json.NewDecoder(bytes.NewReader(data))
	gd.UseNumber()
	if err := gd.Decode(&generic); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if _, err := gd.Token(); err != io.EOF {
		return errors.New("invalid arguments: trailing data after the JSON value")
	}
	if _, ok := generic.(map[string]any); !ok {
		return errors.New("invalid arguments: expected a JSON object")
	}
	if err := exactKeys(generic, rt.Elem(), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// exactKeys walks decoded JSON beside the Go type it will land in and
// refuses object keys that are not exactly a field's JSON name.
func exactKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				ft, ok := fields[k]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, k) {
							return fmt.Errorf("invalid arguments: unknown field %q at %s (field names are case-sensitive: %q)", k, orRoot(path), name)
						}
					}
					return fmt.Errorf("invalid arguments: unknown field %q at %s", k, orRoot(path))
				}
				if err := exactKeys(sub, ft, path+"/"+k); err != nil {
					return err
				}
			}
		case reflect.Map:
			for k, sub := range val {
				if err := exactKeys(sub, t.Elem(), path+"/"+k); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range val {
				if err := exactKeys(sub, t.Elem(), path+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func orRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

// jsonFields maps the JSON names of a struct's fields (embedded structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// EncodeOutput is what Return sends as the export's output: a string as
// its bytes, a []byte as is, json.RawMessage as is, anything else as JSON.
func EncodeOutput(v any) ([]byte, error) {
	switch o := v.(type) {
	case string:
		return []byte(o), nil
	case []byte:
		return o, nil
	case json.RawMessage:
		return o, nil
	}
	return json.Marshal(v)
}
