package main

import (
	"bytes"
	"html"
	"net/url"
	"strings"
)

// Link is one link of a page.
type Link struct {
	URL  string `json:"url"`
	Text string `json:"text,omitempty"`
}

// maxLinkText bounds a link's text, in bytes (cut at a rune boundary).
const maxLinkText = 200

// extractLinks scans an HTML page for <a href> links, in page order, and
// returns at most limit of them (and whether there were more). It is a small
// tolerant scanner, not an HTML parser: it skips comments, <script>,
// <style>, <textarea> and <title> contents, honours <base href>, resolves
// hrefs against base, drops duplicates (ignoring #fragments), fragment-only
// links to the page itself, and every scheme but http, https, ftp and
// mailto.
func extractLinks(base *url.URL, page []byte, limit int) ([]Link, bool) {
	links := []Link{}
	seen := map[string]bool{}
	self := withoutFragment(base)
	var open *Link // the <a> whose text is being collected
	var text strings.Builder
	addText := func(b []byte) {
		if open != nil && text.Len() < 4*maxLinkText {
			text.Write(b[:min(len(b), 4*maxLinkText)])
		}
	}
	baseSeen := false
	finish := func() {
		if open == nil {
			return
		}
		open.Text = clip(collapse(html.UnescapeString(text.String())), maxLinkText)
		links = append(links, *open)
		open = nil
		text.Reset()
	}
	s := page
	for len(s) > 0 {
		lt := bytes.IndexByte(s, '<')
		if lt < 0 {
			addText(s)
			break
		}
		addText(s[:lt])
		s = s[lt:]
		if bytes.HasPrefix(s, []byte("<!--")) {
			s = skipPast(s[4:], "-->")
			continue
		}
		name, attrs, rest, closing := parseTag(s)
		if name != "" && rest == nil {
			break // a tag cut off by the end of the page: dropped
		}
		if name == "" { // a lone '<'
			addText(s[:1])
			s = s[1:]
			continue
		}
		s = rest
		switch {
		case closing && name == "a":
			finish()
		case closing:
		case name == "script" || name == "style" || name == "textarea" || name == "title":
			s = skipPastFold(s, "</"+name)
		case name == "base":
			// The first <base href> sets the base of the links after it.
			if b, ok := resolve(base, attrs["href"]); ok && !baseSeen && (b.Scheme == "http" || b.Scheme == "https") {
				base, baseSeen = b, true
			}
		case name == "a":
			finish() // an unclosed <a> ends at the next one
			href, ok := attrs["href"]
			if !ok {
				continue
			}
			u, ok := resolve(base, href)
			if !ok {
				continue
			}
			key := withoutFragment(u)
			if key == self && u.Fragment != "" || seen[key] {
				continue
			}
			if len(links) >= limit {
				return links, true
			}
			seen[key] = true
			open = &Link{URL: u.String()}
		}
	}
	finish()
	return links, false
}

// resolve resolves an href against base, keeping only useful schemes.
func resolve(base *url.URL, href string) (*url.URL, bool) {
	href = strings.TrimSpace(href)
	if href == "" {
		return nil, false
	}
	ref, err := url.Parse(href)
	if err != nil {
		return nil, false
	}
	u := base.ResolveReference(ref)
	switch u.Scheme {
	case "http", "https", "ftp":
		if u.Host == "" {
			return nil, false
		}
	case "mailto":
	default:
		return nil, false
	}
	return u, true
}

func withoutFragment(u *url.URL) string {
	c := *u
	c.Fragment, c.RawFragment = "", ""
	return c.String()
}

// parseTag parses the tag at s[0] == '<': its lower-case name, its
// attributes (names lower-case, values entity-decoded; the first of a
// repeated name wins), the input after the tag (nil when the tag has no
// end), and whether it is an end tag. name is "" when s does not start a
// tag.
func parseTag(s []byte) (name string, attrs map[string]string, rest []byte, closing bool) {
	i := 1
	if i < len(s) && s[i] == '/' {
		closing = true
		i++
	}
	j := i
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	if j == i || !isLetter(s[i]) {
		return "", nil, s, false
	}
	name = strings.ToLower(string(s[i:j]))
	attrs = map[string]string{}
	i = j
	for i < len(s) {
		for i < len(s) && (isSpace(s[i]) || s[i] == '/') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '>' {
			return name, attrs, s[i+1:], closing // non-nil: s is
		}
		k := i
		for i < len(s) && !isSpace(s[i]) && s[i] != '=' && s[i] != '>' && s[i] != '/' {
			i++
		}
		if i == k { // a stray '=': skip it
			i++
			continue
		}
		key := strings.ToLower(string(s[k:i]))
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		val := ""
		if i < len(s) && s[i] == '=' {
			i++
			for i < len(s) && isSpace(s[i]) {
				i++
			}
			if i < len(s) && (s[i] == '"' || s[i] == '\'') {
				q := s[i]
				end := bytes.IndexByte(s[i+1:], q)
				if end < 0 {
					return name, attrs, nil, closing // unterminated: the rest of the page is this tag
				}
				val = string(s[i+1 : i+1+end])
				i += end + 2
			} else {
				v := i
				for i < len(s) && !isSpace(s[i]) && s[i] != '>' {
					i++
				}
				val = string(s[v:i])
			}
		}
		if _, dup := attrs[key]; !dup {
			attrs[key] = html.UnescapeString(val)
		}
	}
	return name, attrs, nil, closing
}

// skipPast returns s after the first end, or nil.
func skipPast(s []byte, end string) []byte {
	if i := bytes.Index(s, []byte(end)); i >= 0 {
		return s[i+len(end):]
	}
	return nil
}

// skipPastFold returns s from the first case-insensitive match of end (so
// that the end tag is parsed next), or nil.
func skipPastFold(s []byte, end string) []byte {
	for i := 0; i+len(end) <= len(s); i++ {
		if s[i] == '<' && bytes.EqualFold(s[i:i+len(end)], []byte(end)) {
			return s[i:]
		}
	}
	return nil
}

// collapse trims s and turns every run of white space into one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most n bytes at a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
func isLetter(b byte) bool    { return b|0x20 >= 'a' && b|0x20 <= 'z' }
func isNameByte(b byte) bool  { return isLetter(b) || b >= '0' && b <= '9' || b == '-' || b == ':' }
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f'
}
