package decode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type policyShape struct {
	Version int      `yaml:"version"`
	Grants  []string `yaml:"grants"`
	Rules   []struct {
		Tool   string `yaml:"tool"`
		Action string `yaml:"action"`
	} `yaml:"rules"`
	Schema any `yaml:"input_schema"`
}

// aliasBomb is the "billion laughs": levels anchors, each a list of ten
// aliases of the one before — 10^levels values from a few hundred bytes.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("version: 1\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < levels; i++ {
		b.WriteString("x" + itoa(i) + ": &a" + itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + itoa(i-1))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func itoa(i int) string {
	return strings.TrimLeft(string(rune('0'+i/10))+string(rune('0'+i%10)), "0")
}

// TestYAMLRefusals: each hostile shape is refused with its kind, its
// message and a position, before anything is expanded.
func TestYAMLRefusals(t *testing.T) {
	deepBlock := strings.Repeat("- ", 10_000) + "x\n"
	deepFlow := "grants: " + strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000) + "\n"
	deepJSON := strings.Repeat(`{"a":`, 10_000) + "1" + strings.Repeat("}", 10_000)
	var indented strings.Builder
	for i := 0; i < 100; i++ {
		indented.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	var wide strings.Builder
	for i := 0; i < 1500; i++ {
		wide.WriteString("k" + strings.Repeat("x", i%7) + itoa(i%100) + string(rune('a'+i/100)) + ": 1\n")
	}
	for _, tc := range []struct {
		name, src string
		kind      error
		want      string
		line      int
	}{
		{"alias bomb 10^6", aliasBomb(6), ErrInvalid, "anchors (&name) are not allowed", 2},
		{"alias bomb 10^8", aliasBomb(8), ErrInvalid, "anchors (&name) are not allowed", 2},
		{"alias", "version: 1\ngrants: *g\n", ErrInvalid, "aliases (*name) are not allowed", 2},
		{"anchor in a schema", "input_schema:\n  type: object\n  properties: &p {a: {type: string}}\n", ErrInvalid, "anchors (&name)", 3},
		{"merge key", "input_schema:\n  <<: {type: object}\n", ErrInvalid, "merge keys (<<)", 2},
		{"deep block", deepBlock, ErrInvalid, "nested deeper than 64 levels", 1},
		{"deep flow", deepFlow, ErrInvalid, "nested deeper than 64 levels", 1},
		{"deep JSON", deepJSON, ErrInvalid, "nested deeper than 64 levels", 1},
		{"deep indentation", indented.String(), ErrInvalid, "nested deeper than 64 levels", 65},
		{"wide mapping", wide.String(), ErrTooLarge, "more than 1000 keys in one mapping", 1001},
		{"tokens", "grants: [" + strings.Repeat("a, ", 30_000) + "]\n", ErrTooLarge, "more than 20000 YAML tokens", 1},
		{"comments count", strings.Repeat("#\n", 30_000), ErrTooLarge, "more than 20000 YAML tokens", 20_001},
		{"duplicate key", "version: 1\ngrants: []\nversion: 1\n", ErrInvalid, `mapping key "version" already defined`, 3},
		{"duplicate nested key", "input_schema:\n  a: 1\n  a: 2\n", ErrInvalid, "already defined", 3},
		{"duplicate JSON key", `{"input_schema": {"a": 1, "a": 2}}`, ErrInvalid, "already defined", 1},
		{"unknown field", "version: 1\ngrantz: []\n", ErrInvalid, `unknown field "grantz"`, 2},
		{"wrong type", "version: one\n", ErrInvalid, "cannot unmarshal", 1},
		{"second document", "version: 1\n---\nversion: 2\n", ErrInvalid, "a second YAML document", 3},
		{"not UTF-8", "version: 1\ngrants: [\"\xff\"]\n", ErrInvalid, "not valid UTF-8", 2},
		{"bad escape", "grants: [\"\\q\"]\n", ErrInvalid, "unknown escape", 1},
		{"too big", "version: 1\n" + strings.Repeat("# filler\n", 120_000), ErrTooLarge, "over the limit of 1 MiB", 0},
		// Found by FuzzYAML: goccy/go-yaml v1.19.2 dereferences nil on the
		// first, and nests the second as deep as it is long.
		{"a tag that panicked the library", "%TAG !! 0\n--- ! ", ErrInvalid, "YAML tags (!name) are not allowed", 2},
		{"tags nesting line by line", strings.Repeat("0: !\n", 500), ErrInvalid, "YAML tags (!name) are not allowed", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p policyShape
			_, err := YAML("p.yaml", []byte(tc.src), &p, nil)
			var de *Error
			if !errors.As(err, &de) || !errors.Is(err, tc.kind) || !strings.Contains(de.Message, tc.want) || de.Line != tc.line {
				t.Fatalf("got %v (kind %v), want %q at line %d", err, errors.Unwrap(err), tc.want, tc.line)
			}
			if tc.line > 0 && de.Column == 0 {
				t.Fatalf("no column: %v", err)
			}
		})
	}
}

// TestYAMLAccepts: what warden's files look like passes, and brackets,
// ampersands and stars inside strings, comments and block scalars are
// text.
func TestYAMLAccepts(t *testing.T) {
	src := `# a policy
version: 1
grants:
  - "fs.read:**"
  - fs.write:notes/[ab]*.md   # brackets in a plain scalar
  - 'exec:*'
rules:
  - { tool: "*", action: allow }
  - tool: shell
    action: deny
input_schema:
  type: object
  description: |
    [[[[ &not an anchor *nor an alias
      {{{{
  properties:
    a: {type: string, pattern: "^[a-z]*&$"}
`
	var p policyShape
	file, err := YAML("ok.yaml", []byte(src), &p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 1 || len(p.Grants) != 3 || p.Grants[1] != "fs.write:notes/[ab]*.md" || len(p.Rules) != 2 {
		t.Fatalf("%+v", p)
	}
	if l, c := Position(file, "$.rules[1].action"); l != 10 || c != 13 {
		t.Fatalf("position %d:%d", l, c)
	}
	// The budget is the caller's to set.
	if _, err := YAML("p.yaml", []byte("grants: [[[x]]]\n"), &p, &Limits{MaxDepth: 2}); err == nil {
		t.Fatal("MaxDepth 2 let depth 3 through")
	}
	// An empty file and a file of comments decode to nothing.
	for _, s := range []string{"", "# nothing\n", "---\n"} {
		var q policyShape
		if _, err := YAML("e.yaml", []byte(s), &q, nil); err != nil || q.Version != 0 {
			t.Fatalf("%q: %v %+v", s, err, q)
		}
	}
}

// TestReadFile: the cap is checked before reading (a sparse file of 200 MB
// costs nothing), only regular files are read, and opening a FIFO does not
// block.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadFile(big, 0)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "209715200 bytes, over the limit of 1 MiB") {
		t.Fatalf("200 MB: %v", err)
	}
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(small, 0); err != nil || string(b) != "version: 1\n" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadFile(small, 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("cap 4: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if _, err := ReadFile(fifo, 0); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
		t.Fatalf("fifo: %v", err)
	}
	if _, err := ReadFile(dir, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("directory: %v", err)
	}
	if _, err := ReadFile("/dev/zero", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("/dev/zero: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	// A reader without a size stops one byte past the cap.
	if _, err := Read(strings.NewReader(strings.Repeat("x", 11)), "r", 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("reader: %v", err)
	}
}

// TestJSON: strict JSON with positions and pointers.
func TestJSON(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"a":1,"a":2}`, `1:8: duplicate key "a" at "/"`},
		{"{\n  \"x\": [{}, {\"c\": 1, \"c\": 2}]\n}", `2:22: duplicate key "c" at "/x/1"`},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), `1:66: nesting deeper than 64 at "/0/0/0`},
		{`{"a":`, "1:6: unexpected end of JSON"},
		{`{} {}`, "1:4: unexpected data after the value"},
		{"{\"a\":\"\xff\"}", "1:7: not valid UTF-8"},
		{`{"a" 1}`, "1:6: invalid character '1' after object key"},
	} {
		_, err := JSON("j.json", []byte(tc.src), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: got %v, want %q", tc.src, err, tc.want)
		}
	}
	v, err := JSON("j.json", []byte(`{"a":[1,"b",true,null]}`), nil)
	if err != nil || Kind(v) != "an object" {
		t.Fatalf("%v %v", v, err)
	}
}

// TestYAMLPool: decodes sharing a Pool take their tokens from it; the one
// that would take more than is left is refused (TOO_LARGE, with its
// position) and leaves nothing for the next; without a Pool each file has
// its own MaxTokens.
func TestYAMLPool(t *testing.T) {
	doc := "grants: [" + strings.Repeat("a, ", 99) + "a]\n" // some 200 tokens
	pool := 500
	lim := &Limits{Pool: &pool}
	var v policyShape
	for i := 0; i < 2; i++ {
		if _, err := YAML("ok.yaml", []byte(doc), &v, lim); err != nil {
			t.Fatalf("decode %d within the pool: %v", i+1, err)
		}
	}
	left := pool
	if left <= 0 || left >= 500-2*100 {
		t.Fatalf("pool left %d after two decodes of ~200 tokens", left)
	}
	_, err := YAML("third.yaml", []byte(doc), &v, lim)
	var de *Error
	if !errors.As(err, &de) || !errors.Is(err, ErrTooLarge) || de.Line != 1 || de.Column == 0 ||
		!strings.Contains(err.Error(), "budget this file shares") {
		t.Fatalf("third decode: %v", err)
	}
	if pool > 0 {
		t.Fatalf("pool left %d after a refusal, want none", pool)
	}
	if _, err := YAML("tiny.yaml", []byte("grants: [a]\n"), &v, lim); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a decode after the pool ran out: %v", err)
	}
	if _, err := YAML("free.yaml", []byte(doc), &v, nil); err != nil {
		t.Fatalf("without a pool: %v", err)
	}
}
