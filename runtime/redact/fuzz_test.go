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
	f.Add("GET /cb?state=cGFzc3dvcmQ9aHVudGVyMg%3D%3D&next=%252Fhome x/ZGJfcGFzc3dvcmQ9YWI", "sekrit-value", uint16(7))
	f.Add("q=DB_PASSWORD%3Dhunter2%26user%3D%5BREDACTED%5D+%41", "hunter2x", uint16(2))
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

// FuzzEncoded: an encoded secret (every family and encoding of
// TestEncodedSecrets) between any two texts, set apart from them by a
// byte that ends a run (a space, a line break, a quote, a bracket): the
// redaction never panics, is idempotent, finds nothing in its own output,
// and leaves neither the secret nor its encoding where the secret, not
// encoded, would be masked — unless the texts around it hold them.
func FuzzEncoded(f *testing.F) {
	f.Add("before", "after", uint8(0), uint8(3), uint8(0))
	f.Add("password: ", "", uint8(16), uint8(10), uint8(1))
	f.Add("xxxxxxxxxxxxxxxxxxxxxxxx", "%41%42", uint8(13), uint8(11), uint8(1))
	f.Add("https://x/?a=%25", "&b=Zm9v", uint8(19), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, before, after string, family, encoding, sep uint8) {
		fam := encodedFamilies[int(family)%len(encodedFamilies)]
		en := secretEncodings[int(encoding)%len(secretEncodings)]
		seps := []string{" ", "\n", `"`, "'", "\t", "<", ">", "(", ")", "\r\n"}
		sp := seps[int(sep)%len(seps)]
		encoded := en.enc(fam.carrier)
		text := before + sp + encoded + sp + after
		out := String(text)
		if again := String(out); again != out {
			t.Fatalf("not idempotent:\n in   %q\n once %q\n twice %q", text, out, again)
		}
		if Contains(out) {
			t.Fatalf("Contains(String(%q)) is true", text)
		}
		if strings.Contains(String(before+sp+fam.carrier+sp+after), fam.secret) {
			return // not masked where it stands when not encoded either
		}
		if left := secretLeft(out, fam.secret, encoded, en.base64, en.enc); left != "" && !strings.Contains(before+after, left) {
			t.Fatalf("%s, %s: %q left in\n%q\nfrom %q", fam.name, en.name, left, out, text)
		}
	})
}
