package jsonschema_test

// Warden's test of its patch (README.md): the patched package compiles and
// validates exactly as the published one does, and a schema compiled
// without the metaschema check validates as it does with it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	published "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wardenrt/warden/internal/thirdparty/jsonschema"
)

// suite is a directory of test files (DIR/tests/DRAFT/….json, or DIR/DRAFT/….json)
// and the remote documents they refer to (DIR/remotes).
type suite struct{ tests, remotes string }

func suites(t *testing.T) []suite {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/google/jsonschema-go").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m github.com/google/jsonschema-go (its copy of the JSON Schema Test Suite): %v", err)
	}
	g := filepath.Join(dir, "jsonschema", "testdata")
	return []suite{
		{"testdata/Extra-Test-Suite/tests", "testdata/Extra-Test-Suite/remotes"},
		{g, filepath.Join(g, "remotes")},
	}
}

// remotes serves http://localhost:1234/… from a suite's remotes directory.
type remotes string

func (rl remotes) Load(url string) (any, error) {
	rem, ok := strings.CutPrefix(url, "http://localhost:1234/")
	if !ok {
		return nil, errors.New("no network in tests")
	}
	f, err := os.Open(filepath.Join(string(rl), rem))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}

var address = regexp.MustCompile(`0x[0-9a-f]+`)

// same is an error as text and as Go value, its pointers blanked and its
// lines and their characters sorted: the published package orders the
// causes of an error, and the two locations of a duplicate id, by map
// iteration.
func same(err error) string {
	if err == nil {
		return "<nil>"
	}
	// The errors split out of the package (schemaerror, formatcheck) print
	// their own package's name; the published package's are all jsonschema's.
	text := strings.NewReplacer("schemaerror.", "jsonschema.", "formatcheck.", "jsonschema.").Replace(fmt.Sprintf("%v\n%#v", err, err))
	lines := strings.Split(address.ReplaceAllString(text, "0x"), "\n")
	for i, l := range lines {
		r := []rune(l)
		slices.Sort(r)
		lines[i] = string(r)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

var drafts = map[string][2]any{
	"draft4":       {jsonschema.Draft4, published.Draft4},
	"draft6":       {jsonschema.Draft6, published.Draft6},
	"draft7":       {jsonschema.Draft7, published.Draft7},
	"draft2019-09": {jsonschema.Draft2019, published.Draft2019},
	"draft2020-12": {jsonschema.Draft2020, published.Draft2020},
}

// agree is compare, tried again while it finds a difference: the
// published package's own errors differ from run to run in places (under
// a custom metaschema it reports an invalid patternProperties key at
// "/$schema" or at "/patternProperties", by map iteration), so the two
// agree when some run of each gives the same.
func agree(s suite, draft string, schema any, instances []any, strict bool) error {
	var err error
	for range 20 {
		if err = compare(s, draft, schema, instances, strict); err == nil {
			return nil
		}
	}
	return err
}

// compare compiles schema with both packages (as the draft's, asserting
// formats, content and vocabularies when strict) and validates every
// instance with both; it reports the first difference.
func compare(s suite, draft string, schema any, instances []any, strict bool) error {
	const url = "http://testsuites.com/schema.json"
	ours, theirs := jsonschema.NewCompiler(), published.NewCompiler()
	if d, ok := drafts[draft]; ok {
		ours.DefaultDraft(d[0].(*jsonschema.Draft))
		theirs.DefaultDraft(d[1].(*published.Draft))
	}
	if strict {
		ours.AssertFormat()
		ours.AssertContent()
		ours.AssertVocabs()
		theirs.AssertFormat()
		theirs.AssertContent()
		theirs.AssertVocabs()
	}
	ours.UseLoader(jsonschema.SchemeURLLoader{"http": remotes(s.remotes)})
	theirs.UseLoader(published.SchemeURLLoader{"http": remotes(s.remotes)})
	raw, _ := json.Marshal(schema)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return err
	}
	if a, b := ours.AddResource(url, doc), theirs.AddResource(url, doc); same(a) != same(b) {
		return fmt.Errorf("AddResource %s: %v, published %v", raw, a, b)
	}
	sa, ea := ours.Compile(url)
	sb, eb := theirs.Compile(url)
	if same(ea) != same(eb) {
		return fmt.Errorf("Compile %s:\n%v\npublished:\n%v", raw, ea, eb)
	}
	if ea != nil {
		return nil
	}
	// The same schema compiled without the metaschema check (the
	// patch's SkipMetaschemaCheck) validates the same: the check refuses
	// schemas, it changes nothing in what a valid one compiles to.
	unchecked := jsonschema.NewCompiler()
	if d, ok := drafts[draft]; ok {
		unchecked.DefaultDraft(d[0].(*jsonschema.Draft))
	}
	if strict {
		unchecked.AssertFormat()
		unchecked.AssertContent()
		unchecked.AssertVocabs()
	}
	unchecked.UseLoader(jsonschema.SchemeURLLoader{"http": remotes(s.remotes)})
	unchecked.SkipMetaschemaCheck()
	if err := unchecked.AddResource(url, doc); err != nil {
		return err
	}
	sc, err := unchecked.Compile(url)
	if err != nil {
		return fmt.Errorf("Compile %s without the metaschema check: %v", raw, err)
	}
	for _, v := range instances {
		b, _ := json.Marshal(v)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			return err
		}
		x, y, z := sa.Validate(inst), sb.Validate(inst), sc.Validate(inst)
		if same(x) != same(y) {
			return fmt.Errorf("Validate %s against %s:\n%v\npublished:\n%v", b, raw, x, y)
		}
		if same(z) != same(y) {
			return fmt.Errorf("Validate %s against %s compiled without the metaschema check:\n%v\npublished:\n%v", b, raw, z, y)
		}
	}
	return nil
}

// TestSameAsPublished: every schema and instance of the suites, compiled
// and validated by the patched and the published package, with the same
// outcome and the same errors.
func TestSameAsPublished(t *testing.T) {
	schemas, instances := 0, 0
	for _, s := range suites(t) {
		err := filepath.WalkDir(s.tests, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
				return err
			}
			rel, _ := filepath.Rel(s.tests, p)
			draft, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var groups []struct {
				Schema any
				Tests  []struct{ Data any }
			}
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil // not a test file (a remote, a listing)
			}
			for _, g := range groups {
				var data []any
				for _, c := range g.Tests {
					data = append(data, c.Data)
				}
				for _, strict := range []bool{false, true} {
					if err := agree(s, draft, g.Schema, data, strict); err != nil {
						t.Errorf("%s: %v", rel, err)
					}
					schemas++
					instances += len(data)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The schemas the published package refuses (its own list).
	raw, err := os.ReadFile("testdata/invalid_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var invalid []struct{ Schema any }
	if err := json.Unmarshal(raw, &invalid); err != nil {
		t.Fatal(err)
	}
	for _, c := range invalid {
		if err := agree(suite{remotes: "testdata"}, "", c.Schema, nil, false); err != nil {
			t.Error(err)
		}
		schemas++
	}
	if schemas < 1000 || instances < 3000 {
		t.Fatalf("only %d schemas and %d instances compared: are the suites there?", schemas, instances)
	}
	t.Logf("%d schemas, %d instances: the same", schemas, instances)
}

// TestSameMetaschemaChecks: schemas that the metaschemas refuse (and a
// few they accept), in every draft, under custom metaschemas that pick
// vocabularies, and with a resource inside that switches draft — the
// checks the patch moved from init to first use.
func TestSameMetaschemaChecks(t *testing.T) {
	g := suites(t)[1]
	metas := []string{"",
		"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
		"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
		"https://json-schema.org/draft/2020-12/schema",
		"http://localhost:1234/draft2020-12/metaschema-no-validation.json",
		"http://localhost:1234/draft2020-12/metaschema-optional-vocabulary.json",
		"http://localhost:1234/draft2020-12/format-assertion-true.json",
	}
	bodies := []string{
		`{"type": "object"}`, `{"type": 5}`, `{"type": "nope"}`, `{"minLength": -1}`, `{"pattern": "("}`,
		`{"properties": 5}`, `{"properties": {"a": {"type": "nope"}}}`, `{"required": "x"}`, `{"enum": []}`,
		`{"items": 5}`, `{"format": 5}`, `{"minimum": "x"}`, `{"additionalProperties": "no"}`,
		`{"dependentRequired": {"a": 5}}`, `{"unevaluatedProperties": 5}`, `{"prefixItems": {}}`,
		`{"contentMediaType": 5}`, `{"$defs": {"x": {"minimum": "x"}}}`, `{"definitions": {"x": {"maxItems": -2}}}`,
		`{"exclusiveMinimum": true, "minimum": 1}`, `{"$ref": 5}`, `{"patternProperties": {"(": {}}}`,
		`{"$defs": {"x": {"$id": "http://x.example/x", "$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 5}}}`,
		`{"$defs": {"x": {"$id": "http://x.example/y", "$schema": "https://json-schema.org/draft/2019-09/schema", "minItems": "x"}}}`,
	}
	instances := []any{nil, true, json.Number("3"), "abc", map[string]any{"a": json.Number("1")}, []any{json.Number("1")}}
	for _, meta := range metas {
		for _, body := range bodies {
			var schema map[string]any
			if err := json.Unmarshal([]byte(body), &schema); err != nil {
				t.Fatal(err)
			}
			if meta != "" {
				schema["$schema"] = meta
			}
			for _, strict := range []bool{false, true} {
				if err := agree(g, "", schema, instances, strict); err != nil {
					t.Errorf("$schema %q: %v", meta, err)
				}
			}
		}
	}
}

// TestFirstUseConcurrent: in a fresh process (this test binary again),
// schemas of every draft compiled from many goroutines at once, the
// metaschemas compiled on that first use; run with -race.
func TestFirstUseConcurrent(t *testing.T) {
	if os.Getenv("JSONSCHEMA_FIRST_USE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFirstUseConcurrent$", "-test.count=1")
		cmd.Env = append(os.Environ(), "JSONSCHEMA_FIRST_USE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Go(func() {
			for _, d := range []*jsonschema.Draft{jsonschema.Draft4, jsonschema.Draft6, jsonschema.Draft7, jsonschema.Draft2019, jsonschema.Draft2020} {
				c := jsonschema.NewCompiler()
				c.DefaultDraft(d)
				c.AssertFormat()
				doc := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": json.Number(fmt.Sprint(i))}}}
				if err := c.AddResource("mem:///s.json", doc); err != nil {
					errs <- err
					return
				}
				s, err := c.Compile("mem:///s.json")
				if err != nil {
					errs <- err
					return
				}
				if s.Validate(map[string]any{"n": json.Number("-1")}) == nil {
					errs <- fmt.Errorf("%v: -1 passed minimum %d", d, i)
				}
				bad := map[string]any{"type": "object", "minimum": "x"}
				c = jsonschema.NewCompiler()
				c.DefaultDraft(d)
				if err := c.AddResource("mem:///bad.json", bad); err != nil {
					errs <- err
					return
				}
				if _, err := c.Compile("mem:///bad.json"); err == nil {
					errs <- fmt.Errorf("%v: a schema with minimum \"x\" compiled", d)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
