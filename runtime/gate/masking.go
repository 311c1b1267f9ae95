package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/redact"
)

// Masking on the way out, restoring on the way in: the gate masks the
// secrets in every result with ids kept in the run's Vault, and restores a
// mask that comes back in a call's arguments — before the tool sees them —
// when it lands, unchanged, in the file it came from. See RATIONALE.md
// ("Masks go out, originals come back") and docs/redaction.md.

// ---- the way out ----------------------------------------------------------

// originAt returns the file the output byte at came from (at -1: Data),
// or "".
func originAt(origins []tool.Origin, at int) string {
	whole := ""
	for _, o := range origins {
		if o.Start == 0 && o.End == 0 {
			whole = o.Path
			continue
		}
		if at >= o.Start && at < o.End {
			return o.Path
		}
	}
	return whole
}

func wholeOrigin(origins []tool.Origin) string {
	for _, o := range origins {
		if o.Start == 0 && o.End == 0 {
			return o.Path
		}
	}
	return ""
}

// maskPrefix begins every mask, "[REDACTED]" and "[REDACTED:kind:id]"
// alike: text without it holds none for Vault.Admit to rewrite.
var maskPrefix = []byte(strings.TrimSuffix(redact.Mask, "]"))

// minRestoredLiteral is the shortest original restored in a call's
// arguments that is masked wherever the call's outcome repeats it.
const minRestoredLiteral = 4

// maskOutcome masks every secret red finds in o with masks kept in v: the output
// (each secret with the file it was read from), the data, the warnings and
// the error. When anything was masked it adds a warning saying so. Data
// that cannot be marshalled or masked is dropped (fail closed). A refusal
// is the gate's own error, not a tool's output.
func (g *Gate) maskOutcome(o tool.Outcome, v *tool.Vault, red *redact.Redactor, refusal bool) tool.Outcome {
	whole := wholeOrigin(o.Origins)
	origins := o.Origins
	admitted, rewritten := v.Admit(o.Output, whole)
	if len(rewritten) > 0 {
		o.Output = admitted
		origins = []tool.Origin{{Path: whole}} // offsets moved: keep only the whole-output origin
	}
	var shown []redact.Secret
	o.Output, shown = red.Replace(o.Output, func(kind, original string, at int) string {
		return v.Mask(kind, original, originAt(origins, at))
	})
	shown = withRewritten(o.Output, shown, rewritten)
	noOrigin := func(kind, original string, _ int) string { return v.Mask(kind, original, "") }
	// other counts what was masked, or rewritten by admit, in the
	// warnings and the error.
	var other int
	admit := func(s, file string) string {
		out, wrote := v.Admit(s, file)
		other += len(wrote)
		return out
	}
	for i, w := range o.Warnings {
		var found []redact.Secret
		o.Warnings[i], found = red.Replace(admit(w, ""), noOrigin)
		other += len(found)
	}
	if o.Err != nil {
		// The gate's own refusals quote masks as the caller sent them.
		admitErr := func(s string) string { return s }
		if !refusal {
			admitErr = func(s string) string { return admit(s, "") }
		}
		o.Err = o.Err.MapText(func(s string) string {
			out, found := red.Replace(admitErr(s), noOrigin)
			other += len(found)
			return out
		})
	}
	var inData int
	if o.Data != nil {
		data, err := json.Marshal(o.Data)
		var masked []byte
		var found []redact.Secret
		var wrote []string
		if err == nil {
			if bytes.Contains(data, maskPrefix) { // else Admit has nothing to rewrite
				var text string
				text, wrote = v.Admit(string(data), whole) // json.Marshal's, masks rewritten inside strings: compact
				data = []byte(text)
			}
			masked, found, err = red.ReplaceCompactJSON(data, func(kind, original string, _ int) string {
				return v.Mask(kind, original, whole)
			})
		}
		if err != nil {
			o.Data = nil
			o.Err = tool.Errorf(tool.CodeInternal, "this is a bug in warden; please report it", "tool data could not be recorded safely: %v", err)
		} else {
			o.Data = json.RawMessage(masked)
			inData = len(found) + len(wrote)
		}
	}
	if w := maskWarning(shown, inData, other); w != "" {
		o.Warnings = append(o.Warnings, w)
	}
	o.Origins = nil
	return o
}

// withRewritten adds to the secrets masked in out the mask-shaped text that
// admit rewrote before (the masks it wrote, in order), each on its line of
// out, and returns them all by line.
func withRewritten(out string, shown []redact.Secret, rewritten []string) []redact.Secret {
	if len(rewritten) == 0 {
		return shown
	}
	line, pos := 1, 0
	for _, m := range redact.FindMasks(out) {
		if len(rewritten) == 0 {
			break
		}
		if m.Text() != rewritten[0] {
			continue
		}
		line += strings.Count(out[pos:m.Start], "\n")
		pos = m.Start
		shown = append(shown, redact.Secret{Kind: "mask-text", Mask: rewritten[0], Line: line})
		rewritten = rewritten[1:]
	}
	sort.SliceStable(shown, func(i, j int) bool { return shown[i].Line < shown[j].Line })
	return shown
}

// maskWarning says what masking changed: how many secrets, of which
// kinds, on which lines of the output, and how many in data, warnings and
// the error — secrets, and mask-shaped text rewritten as a mask-text
// mask (see Vault.admit).
func maskWarning(shown []redact.Secret, inData, other int) string {
	if len(shown)+inData+other == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("secrets masked: ")
	var parts []string
	if len(shown) > 0 {
		kinds := map[string]int{}
		var lines []int
		for _, s := range shown {
			kinds[s.Kind]++
			if len(lines) == 0 || lines[len(lines)-1] != s.Line {
				lines = append(lines, s.Line)
			}
		}
		var ks []string
		for k, n := range kinds {
			if n > 1 {
				k = fmt.Sprintf("%s ×%d", k, n)
			}
			ks = append(ks, k)
		}
		sort.Strings(ks)
		parts = append(parts, fmt.Sprintf("%d in the output (%s) on %s %s", len(shown), strings.Join(ks, ", "),
			map[bool]string{true: "line", false: "lines"}[len(lines) == 1], lineList(lines)))
	}
	if inData > 0 {
		parts = append(parts, fmt.Sprintf("%d in data", inData))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d in warnings or the error", other))
	}
	b.WriteString(strings.Join(parts, "; "))
	b.WriteString(". Each [REDACTED:kind:id] stands for the original text: written back unchanged into the file it came from " +
		"(fs_write, modify_config, git_apply_patch, a shell here-document or redirection), it is restored there; anywhere else it is refused.")
	return b.String()
}

// lineList writes ascending line numbers with ranges: 1-3, 7, 9-10; at
// most 20 items.
func lineList(lines []int) string {
	var parts []string
	for i := 0; i < len(lines); {
		j := i
		for j+1 < len(lines) && lines[j+1] == lines[j]+1 {
			j++
		}
		if len(parts) == 20 {
			parts = append(parts, "…")
			break
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", lines[i], lines[j]))
		} else {
			parts = append(parts, fmt.Sprint(lines[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// ---- the way in -----------------------------------------------------------

// argMask is a mask found in a call's arguments.
type argMask struct {
	ptr   string // JSON pointer of the string holding it
	ref   redact.MaskRef
	inKey bool
}

// restore is one mask a call's arguments bring back to its original.
type restore struct {
	mask  string
	entry *tool.VaultEntry
	path  string // the file it lands in
}

// collectMasks finds the masks (with an id) in the strings and keys of v.
func collectMasks(v any, ptr string, out *[]argMask) {
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "[REDACTED:") {
			for _, m := range redact.FindMasks(t) {
				*out = append(*out, argMask{ptr: ptr, ref: m})
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kp := ptr + "/" + tool.EscapePointer(k)
			if strings.Contains(k, "[REDACTED:") {
				for _, m := range redact.FindMasks(k) {
					*out = append(*out, argMask{ptr: kp, ref: m, inKey: true})
				}
			}
			collectMasks(t[k], kp, out)
		}
	case []any:
		for i, e := range t {
			collectMasks(e, fmt.Sprintf("%s/%d", ptr, i), out)
		}
	}
}

// replaceStrings returns a copy of v in which the string at each pointer
// of repl is replaced.
func replaceStrings(v any, ptr string, repl map[string]string) any {
	switch t := v.(type) {
	case string:
		if r, ok := repl[ptr]; ok {
			return r
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = replaceStrings(e, ptr+"/"+tool.EscapePointer(k), repl)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = replaceStrings(e, fmt.Sprintf("%s/%d", ptr, i), repl)
		}
		return out
	}
	return v
}

func maskRefused(hint, format string, args ...any) *tool.Error {
	return tool.Errorf(tool.CodeInvalidInput, hint, format, args...)
}

const (
	hintUnknownMask = "copy a mask exactly as a result of this run showed it; a mask from another run, session or `warden call` " +
		"cannot be restored (write the text without it)"
	hintNoSink = "a mask is restored only where it is written back into a file (fs_write content, modify_config lines, " +
		"a patch, a shell here-document or echo redirected to a file): leave it out here"
)

// restoreArgs replaces the masks in the arguments of a tool that writes
// files (a Sinker) by their originals where they land in a file (its
// Sinks), and refuses a mask the vault does not know, one that lands
// anywhere else (a path, a program's arguments: never hand a secret to a
// program, and never write a mask where a program might put it in a
// file), and one whose original would change how the argument is read.
// A tool that writes no file gets the masks as the caller saw them: it
// can do nothing with a secret it does not hold. It returns the call with
// the restored arguments (nil if there is nothing to restore) and what it
// restores; whether each original may land in its file is checked later,
// once the call's capabilities are (checkRestores).
func (g *Gate) restoreArgs(t tool.Tool, call *tool.Call, v *tool.Vault) (*tool.Call, []restore, *tool.Error) {
	sinker, ok := t.(tool.Sinker)
	if !ok {
		return nil, nil, nil // it writes no file: it gets the text as the caller saw it
	}
	var masks []argMask
	collectMasks(call.Decoded(), "", &masks)
	type pending struct {
		argMask
		entry *tool.VaultEntry
	}
	var todo []pending
	for _, m := range masks {
		e, ok := v.Lookup(m.ref)
		switch {
		case !ok && m.ref.ID == tool.VaultUnkept:
			return nil, nil, maskRefused("read the file again in a new run to work on it",
				"mask %s in %s was not kept: the run had masked too many secrets to keep them all", m.ref.Text(), tool.PointerOrRoot(m.ptr))
		case !ok:
			return nil, nil, maskRefused(hintUnknownMask, "mask %s in %s is not one this run handed out", m.ref.Text(), tool.PointerOrRoot(m.ptr))
		case e.Literal():
			continue // text that looks like a mask and stands for itself
		case m.inKey:
			return nil, nil, maskRefused(hintNoSink, "mask %s is in an object key (%s), which is not written into a file", m.ref.Text(), m.ptr)
		}
		todo = append(todo, pending{m, e})
	}
	if len(todo) == 0 {
		return nil, nil, nil
	}
	sinks, err := sinker.Sinks(call)
	if err != nil {
		return nil, nil, tool.AsError(err)
	}
	// Restore, string by string, left to right, noting where each
	// original lands in the restored string.
	type placed struct {
		pending
		path       string
		start, end int // in the restored string
	}
	strs := map[string]string{}
	var order []string
	var places []placed
	shift := map[string]int{}
	for _, p := range todo {
		sink, found := findSink(sinks, p.ptr, p.ref.Start, p.ref.End)
		if !found {
			return nil, nil, maskRefused(hintNoSink, "mask %s in %s does not land in a file", p.ref.Text(), tool.PointerOrRoot(p.ptr))
		}
		if sink.Forbid != "" && strings.ContainsAny(p.entry.Original(), sink.Forbid) {
			return nil, nil, maskRefused("write this file with fs_write",
				"mask %s in %s stands for text holding one of %q, which would change how %s is read here", p.ref.Text(), p.ptr, sink.Forbid, p.ptr)
		}
		s, seen := strs[p.ptr]
		if !seen {
			s = stringAt(call.Decoded(), p.ptr)
			order = append(order, p.ptr)
		}
		d := shift[p.ptr]
		start := p.ref.Start + d
		s = s[:start] + p.entry.Original() + s[p.ref.End+d:]
		strs[p.ptr] = s
		shift[p.ptr] = d + len(p.entry.Original()) - (p.ref.End - p.ref.Start)
		places = append(places, placed{p, sink.Path, start, start + len(p.entry.Original())})
	}
	value, _ := replaceStrings(call.Decoded(), "", strs).(map[string]any)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return nil, nil, tool.Errorf(tool.CodeInternal, "", "restoring masks: %v", err)
	}
	restored := *call
	restored.SetArgs(json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), value)
	// Where does each original land now? In the same file, in a sink.
	after, err := sinker.Sinks(&restored)
	if err != nil {
		return nil, nil, maskRefused("write this file with fs_write",
			"the text behind the masks in %s would change how the arguments are read: %s", strings.Join(order, ", "), tool.AsError(err).Message)
	}
	var out []restore
	for _, p := range places {
		sink, found := findSink(after, p.ptr, p.start, p.end)
		if !found || sink.Path != p.path {
			return nil, nil, maskRefused("write this file with fs_write",
				"the text behind mask %s would change how %s is read (it would end a here-document, a quote or a file of the patch)", p.ref.Text(), p.ptr)
		}
		out = append(out, restore{mask: p.ref.Text(), entry: p.entry, path: p.path})
	}
	return &restored, out, nil
}

// findSink returns the sink of arg that holds [start, end).
func findSink(sinks []tool.Sink, arg string, start, end int) (tool.Sink, bool) {
	for _, s := range sinks {
		if s.Arg == arg && s.Start <= start && end <= s.End {
			return s, true
		}
	}
	return tool.Sink{}, false
}

// stringAt returns the string at a JSON pointer of v ("" if none).
func stringAt(v any, ptr string) string {
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := v.(type) {
		case map[string]any:
			v = t[tok]
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(t) {
				return ""
			}
			v = t[i]
		default:
			return ""
		}
	}
	s, _ := v.(string)
	return s
}

// maxHoldsRead caps what the gate reads of a file to see whether it holds
// an original already.
const maxHoldsRead = 64 << 20

// checkRestores refuses a restored original that would land in a file it
// was not read from and that does not hold it already: a secret is never
// moved into another file. It runs once the call's capabilities allow it
// (the file is only read to compare, never shown).
func (g *Gate) checkRestores(call *tool.Call, rs []restore, v *tool.Vault) *tool.Error {
	holds := map[string][]byte{}
	for _, r := range rs {
		if v.ReadFrom(r.entry, r.path) {
			continue
		}
		if !call.Grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: r.path}) {
			return tool.Errorf(tool.CodeCapabilityDenied, "", "mask %s would land in %s, which the grants do not let this call write", r.mask, r.path)
		}
		data, ok := holds[r.path]
		if !ok {
			data = readForCompare(r.path)
			holds[r.path] = data
		}
		if bytes.Contains(data, []byte(r.entry.Original())) {
			continue
		}
		from := v.FilesOf(r.entry)
		where := "came from the output of a command, not from " + r.path
		hint := "write the mask only into a file that holds that secret"
		if len(from) > 0 {
			where = "came from " + strings.Join(from, ", ")
			hint = "write the mask back only into " + strings.Join(from, " or ")
		}
		return maskRefused(hint+"; warden never moves a secret into another file",
			"mask %s %s; it would land in %s, which does not hold it", r.mask, where, r.path)
	}
	return nil
}

// plainMaskWarning says when a call writes the plain mask [REDACTED] into
// a file that does not hold as many already: a mask from memory, a log or
// a stored record was never kept, so it is written as that text and the
// secret it stood for is not restored. The write goes ahead (the text may
// be meant: a document about redaction); the result says so. It runs once
// the call's capabilities allow its writes.
func (g *Gate) plainMaskWarning(t tool.Tool, call *tool.Call) string {
	sinker, ok := t.(tool.Sinker)
	if !ok {
		return ""
	}
	sinks, err := sinker.Sinks(call)
	if err != nil {
		return ""
	}
	count := map[string]int{}
	var paths []string
	for _, sk := range sinks {
		text := stringAt(call.Decoded(), sk.Arg)
		if sk.Start < 0 || sk.End > len(text) || sk.Start > sk.End {
			continue
		}
		if n := strings.Count(text[sk.Start:sk.End], redact.Mask); n > 0 {
			if _, seen := count[sk.Path]; !seen {
				paths = append(paths, sk.Path)
			}
			count[sk.Path] += n
		}
	}
	var parts []string
	total := 0
	for _, p := range paths {
		if !call.Grants.Allows(capability.Need{Kind: capability.FSWrite, Resource: p}) {
			continue
		}
		n := count[p] - bytes.Count(readForCompare(p), []byte(redact.Mask))
		if n <= 0 {
			continue // the file holds that text already
		}
		total += n
		name := p
		if rel, err := filepath.Rel(g.o.Workspace, p); err == nil && filepath.IsLocal(rel) {
			name = rel
		}
		parts = append(parts, fmt.Sprintf("%d in %s", n, name))
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("plain %s written: %s. A plain %s (from memory, a log or a stored record) was never kept: "+
		"it is written as that text, and the secret it stood for, if any, is not restored. To keep a secret, "+
		"read its file again in this run and write back the [REDACTED:kind:id] mask that result shows.",
		redact.Mask, strings.Join(parts, ", "), redact.Mask)
}

// readForCompare reads a file (at most maxHoldsRead) to compare; nil when
// it cannot be read (it does not exist yet).
func readForCompare(path string) []byte {
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
		return nil // missing, or not a file to read (a FIFO would block)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(f, maxHoldsRead))
	return data
}
