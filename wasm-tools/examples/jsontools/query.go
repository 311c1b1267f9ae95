package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// step is one path element: a key, or an index when isIndex.
type step struct {
	key     string
	index   int
	isIndex bool
}

func (s step) String() string {
	if s.isIndex {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	return strconv.Quote(s.key)
}

// parsePath parses $.a.b[0]["odd.key"].c and friends. A leading $ and a
// leading dot are optional; "" selects the whole document.
func parsePath(p string) ([]step, error) {
	p = strings.TrimPrefix(strings.TrimSpace(p), "$")
	var steps []step
	i := 0
	for i < len(p) {
		switch c := p[i]; {
		case c == '.':
			i++
			if i == len(p) && len(steps) == 0 {
				return steps, nil // "." or "$." = the whole document
			}
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("empty key at offset %d", i)
			}
			steps = append(steps, keyStep(p[i:j]))
			i = j
		case c == '[':
			end := strings.IndexByte(p[i:], ']')
			if i+1 < len(p) && p[i+1] == '"' {
				// A quoted key: find the end of the JSON string.
				var key string
				dec := json.NewDecoder(strings.NewReader(p[i+1:]))
				if err := dec.Decode(&key); err != nil {
					return nil, fmt.Errorf("bad quoted key at offset %d: %v", i, err)
				}
				k := i + 1 + int(dec.InputOffset())
				if k >= len(p) || p[k] != ']' {
					return nil, fmt.Errorf("missing ] after quoted key at offset %d", i)
				}
				steps = append(steps, step{key: key})
				i = k + 1
				continue
			}
			if end < 0 {
				return nil, fmt.Errorf("missing ] at offset %d", i)
			}
			n, err := strconv.Atoi(p[i+1 : i+end])
			if err != nil {
				return nil, fmt.Errorf("bad index %q at offset %d", p[i+1:i+end], i)
			}
			steps = append(steps, step{index: n, isIndex: true})
			i += end + 1
		default:
			if len(steps) > 0 {
				return nil, fmt.Errorf("expected . or [ at offset %d", i)
			}
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			steps = append(steps, keyStep(p[i:j]))
			i = j
		}
	}
	return steps, nil
}

// keyStep is a dotted segment: a key, also usable as an index on arrays.
func keyStep(s string) step {
	if n, err := strconv.Atoi(s); err == nil {
		return step{key: s, index: n}
	}
	return step{key: s, index: -1 << 62}
}

// query selects path from doc, keeping the selected value's text exactly
// (key order, number spelling), then indents it.
func query(doc, path string) (string, error) {
	steps, err := parsePath(path)
	if err != nil {
		return "", fmt.Errorf("bad path: %v", err)
	}
	cur := json.RawMessage(doc)
	if !json.Valid(cur) {
		return "", fmt.Errorf("json is not valid JSON")
	}
	where := "$"
	for _, s := range steps {
		cur = bytes.TrimSpace(cur)
		switch {
		case len(cur) > 0 && cur[0] == '{':
			if s.isIndex {
				return "", fmt.Errorf("%s is an object; index it with a key, not %s", where, s)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(cur, &obj); err != nil {
				return "", err
			}
			v, ok := obj[s.key]
			if !ok {
				return "", fmt.Errorf("%s has no key %s", where, s)
			}
			cur = v
			where += "." + s.key
		case len(cur) > 0 && cur[0] == '[':
			if !s.isIndex && s.index == -1<<62 {
				return "", fmt.Errorf("%s is an array; index it with a number, not %s", where, s)
			}
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return "", err
			}
			n := s.index
			if n < 0 {
				n += len(arr)
			}
			if n < 0 || n >= len(arr) {
				return "", fmt.Errorf("%s has %d elements; index %d is out of range", where, len(arr), s.index)
			}
			cur = arr[n]
			where += "[" + strconv.Itoa(n) + "]"
		default:
			return "", fmt.Errorf("%s is not an object or array; cannot select %s", where, s)
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(cur), "", "  "); err != nil {
		return "", err
	}
	return buf.String(), nil
}
