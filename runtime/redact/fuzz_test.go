package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The starting corpus is in testdata/fuzz/FuzzRedact.

func FuzzRedact(f *testing.F) {
	f.Add("password=hunter2 and ghp_0123456789abcdefghijklmnopqrstuvwxyz", "hunter2!", uint16(3))
	f.Add(`{"token": "x", "n": [1, {"api_key": null}]}`, "sekrit-value", uint16(0))
	f.Fuzz(func(t *testing.T, s, lit string, at uint16) {
		out := String(s)
		if again := String(out); again != out {
			t.Fatalf("not idempotent:\n in   %q\n once %q\n twice %q", s, out, again)
		}
		if Contains(out) {
			t.Fatalf("Contains(String(%q)) is true", s)
		}
		if got := string(Bytes([]byte(s))); got != out {
			t.Fatalf("Bytes and String differ: %q vs %q", got, out)
		}

		// Named masks are lossless: each replaced by its original gives
		// the input back; and they are masks: redacting again changes
		// nothing.
		if !strings.Contains(s, maskPrefix) {
			n := 0
			named, secrets := plain.Replace(s, func(kind, _ string, _ int) string {
				n++
				return FormatMask(kind, fmt.Sprintf("%08x", n))
			})
			back := named
			for _, sec := range secrets {
				back = strings.Replace(back, sec.Mask, sec.Original, 1)
			}
			if back != s {
				t.Fatalf("not lossless:\n in   %q\n named %q\n back %q", s, named, back)
			}
			if again := String(named); again != named {
				t.Fatalf("named masks masked again: %q → %q", named, again)
			}
		}

		if json.Valid([]byte(s)) {
			red, err := JSON([]byte(s))
			if err != nil {
				t.Fatalf("JSON(%q): %v", s, err)
			}
			if !json.Valid(red) {
				t.Fatalf("JSON(%q) = %q, not valid JSON", s, red)
			}
			if again, err := JSON(red); err != nil || string(again) != string(red) {
				t.Fatalf("JSON not idempotent: %q → %q → %q (%v)", s, red, again, err)
			}
		} else if _, err := JSON([]byte(s)); err == nil {
			t.Fatalf("JSON(%q) accepted invalid JSON", s)
		}

		// A literal planted anywhere never survives.
		if len(lit) < minLiteral || strings.Contains(Mask, lit) {
			return
		}
		r := New(lit)
		i := int(at) % (len(s) + 1)
		text := s[:i] + lit + s[i:]
		red := r.String(text)
		if strings.Contains(red, lit) {
			t.Fatalf("literal %q survived in %q (from %q)", lit, red, text)
		}
		if again := r.String(red); again != red {
			t.Fatalf("Redactor not idempotent: %q → %q → %q", text, red, again)
		}
		doc, _ := json.Marshal(map[string]any{"k": text, lit: 1})
		jred, err := r.JSON(doc)
		if err != nil {
			t.Fatalf("JSON(%s): %v", doc, err)
		}
		var back map[string]any
		if err := json.Unmarshal(jred, &back); err != nil {
			t.Fatalf("JSON output %q does not decode: %v", jred, err)
		}
		for k, v := range back {
			if strings.Contains(k, lit) {
				t.Fatalf("literal %q survived in key %q of %s", lit, k, jred)
			}
			if sv, ok := v.(string); ok && strings.Contains(sv, lit) {
				t.Fatalf("literal %q survived in %q of %s", lit, sv, jred)
			}
		}
	})
}
