package redact

import (
	"strings"
)

// maskPrefix starts every mask: "[REDACTED]", "[REDACTED:kind]" and
// "[REDACTED:kind:id]".
const maskPrefix = "[REDACTED"

// MaskRef is a mask with a kind and an id found in a text: the form that
// stands for one original (see [FormatMask]).
type MaskRef struct {
	Start, End int // byte offsets of the whole mask
	Kind, ID   string
}

// Text returns the mask as written.
func (m MaskRef) Text() string { return FormatMask(m.Kind, m.ID) }

// FormatMask returns the mask of one secret: "[REDACTED:kind:id]". kind
// is lower case words joined by hyphens (aws-access-key), id lower-case
// hexadecimal (4 to 16 digits).
func FormatMask(kind, id string) string {
	return maskPrefix + ":" + kind + ":" + id + "]"
}

// FindMasks returns the masks with a kind and an id in s, in order.
func FindMasks(s string) []MaskRef {
	var out []MaskRef
	for i := 0; ; {
		j := strings.Index(s[i:], maskPrefix)
		if j < 0 {
			return out
		}
		p := i + j
		end, kind, id := parseMask(s, p)
		if end > 0 && id != "" {
			out = append(out, MaskRef{Start: p, End: end, Kind: kind, ID: id})
			i = end
			continue
		}
		i = p + 1
	}
}

// HasMask reports whether s holds a mask with a kind and an id.
func HasMask(s string) bool {
	return strings.Contains(s, maskPrefix+":") && len(FindMasks(s)) > 0
}

// ContainsAnyMask reports whether s holds a mask of any form, "[REDACTED]"
// included.
func ContainsAnyMask(s string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], maskPrefix)
		if j < 0 {
			return false
		}
		if end, _, _ := parseMask(s, i+j); end > 0 {
			return true
		}
		i += j + 1
	}
}

// parseMask reads a mask of any form at s[p:] (which starts with
// maskPrefix); end is 0 when there is none.
func parseMask(s string, p int) (end int, kind, id string) {
	i := p + len(maskPrefix)
	if i < len(s) && s[i] == ']' {
		return i + 1, "", ""
	}
	if i >= len(s) || s[i] != ':' {
		return 0, "", ""
	}
	i++
	k := i
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9' || s[i] == '-') {
		i++
	}
	kind = s[k:i]
	if !validKind(kind) || i >= len(s) {
		return 0, "", ""
	}
	if s[i] == ']' {
		return i + 1, kind, ""
	}
	if s[i] != ':' {
		return 0, "", ""
	}
	i++
	d := i
	for i < len(s) && i-d <= 16 && (s[i] >= 'a' && s[i] <= 'f' || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	if n := i - d; n < 4 || n > 16 || i >= len(s) || s[i] != ']' {
		return 0, "", ""
	}
	return i + 1, kind, s[d:i]
}

// validKind: lower-case words of letters and digits joined by single
// hyphens, at most 40 bytes.
func validKind(k string) bool {
	if k == "" || len(k) > 40 || k[0] == '-' || k[len(k)-1] == '-' || strings.Contains(k, "--") {
		return false
	}
	return true
}

// maskSpans returns the spans of the masks of every form in s, in order.
func existingMasks(s string) [][2]int {
	var out [][2]int
	for i := 0; ; {
		j := strings.Index(s[i:], maskPrefix)
		if j < 0 {
			return out
		}
		p := i + j
		if end, _, _ := parseMask(s, p); end > 0 {
			out = append(out, [2]int{p, end})
			i = end
			continue
		}
		i = p + 1
	}
}

// isMask reports whether s is exactly one mask of any form.
func isMask(s string) bool {
	if !strings.HasPrefix(s, maskPrefix) {
		return false
	}
	end, _, _ := parseMask(s, 0)
	return end == len(s)
}

// startsWithMask reports whether s begins with a mask of any form.
func startsWithMask(s string) bool {
	if !strings.HasPrefix(s, maskPrefix) {
		return false
	}
	end, _, _ := parseMask(s, 0)
	return end > 0
}
