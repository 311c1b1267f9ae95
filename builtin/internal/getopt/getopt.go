// Package getopt reads a command line as GNU getopt_long reads it with a
// "+" option string — as the launchers of coreutils, findutils and
// util-linux do: options up to the first operand or "--", short options
// in clusters (-kVALUE, -k VALUE), long options by their name or any
// unambiguous prefix of it (--sig KILL is --signal KILL), --name=VALUE.
// What the table does not hold — an unknown or ambiguous option, a value
// where none is taken, a missing value — is reported, never guessed: the
// program would refuse it, and a caller that must know what runs treats
// it as unknown.
package getopt

import "strings"

// Kind is how an option takes a value.
type Kind uint8

const (
	None     Kind = iota // no value
	Required             // the rest of the word, or the next word (--name=VALUE, --name VALUE)
	Optional             // only attached: -kVALUE, --name=VALUE
)

// Table is a program's options. Short is getopt's option string without
// its "+" ("k:s:v": a colon after a letter for a required value, two for
// an optional one). Long lists the long options, separated by spaces, as
// NAME, NAME=C (the same as short option C) and either followed by ":" or
// "::" as in Short ("kill-after=k: signal=s: foreground"). Numeric is
// nice's old form: a word -N, --N or -+N is the adjustment N.
type Table struct {
	Short   string
	Long    string
	Numeric bool
}

// Option is one option as the program reads it.
type Option struct {
	Key      string // the short letter, or the long name of a long-only option
	Value    string
	HasValue bool
	Dynamic  bool // the value is a word known only at run time
}

// Status says how far Parse could read.
type Status uint8

const (
	OK      Status = iota
	Unknown        // an option the table does not hold, an ambiguous prefix, a missing or unwanted value
	Dynamic        // a word known only at run time where an option may stand
)

type long struct {
	name, key string
	kind      Kind
}

// shortKind returns how short option c takes a value; false when the
// table has no such option.
func (t *Table) shortKind(c byte) (Kind, bool) {
	i := strings.IndexByte(t.Short, c)
	if i < 0 || c == ':' {
		return None, false
	}
	switch rest := t.Short[i+1:]; {
	case strings.HasPrefix(rest, "::"):
		return Optional, true
	case strings.HasPrefix(rest, ":"):
		return Required, true
	}
	return None, true
}

// resolve finds the long option named name, or by a prefix of its name
// that no other option with another key or kind shares (getopt_long's
// rule); false when there is none or the prefix is ambiguous.
func (t *Table) resolve(name string) (long, bool) {
	var found []long
	for _, f := range strings.Fields(t.Long) {
		l := long{kind: None}
		switch {
		case strings.HasSuffix(f, "::"):
			f, l.kind = f[:len(f)-2], Optional
		case strings.HasSuffix(f, ":"):
			f, l.kind = f[:len(f)-1], Required
		}
		l.name, l.key, _ = strings.Cut(f, "=")
		if l.key == "" {
			l.key = l.name
		}
		if l.name == name {
			return l, true
		}
		if name != "" && strings.HasPrefix(l.name, name) {
			found = append(found, l)
		}
	}
	for _, l := range found {
		if l.key != found[0].key || l.kind != found[0].kind {
			return long{}, false
		}
	}
	return firstOr(found)
}

// Resolve resolves a long option's name, or an unambiguous prefix of it, as
// getopt_long does: its key and how it takes a value; false when the
// table has no such option or the prefix is ambiguous.
func (t *Table) Resolve(name string) (key string, kind Kind, ok bool) {
	l, ok := t.resolve(name)
	return l.key, l.kind, ok
}

func firstOr(found []long) (long, bool) {
	if len(found) == 0 {
		return long{}, false
	}
	return found[0], true
}

// numeric reports nice's old adjustment form: -N, --N, -+N.
func numeric(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	i := 1
	if a[1] == '-' || a[1] == '+' {
		i = 2
	}
	return i < len(a) && a[i] >= '0' && a[i] <= '9'
}

// Parse reads the options of words from word from on; dyn reports the
// words known only at run time. It returns the options read, the index
// of the first operand, and how far it could read: on Unknown or Dynamic,
// next is the word it stopped at. It returns at once after an option
// whose key is in stop (env's -S, whose value becomes options itself).
func (t *Table) Parse(words []string, dyn func(int) bool, from int, stop string) (opts []Option, next int, st Status) {
	i := from
	// value reads a required value from the next word.
	value := func(o *Option) bool {
		if i+1 >= len(words) {
			return false
		}
		i++
		o.Value, o.HasValue, o.Dynamic = words[i], true, dyn(i)
		return true
	}
	for ; i < len(words); i++ {
		if dyn(i) {
			return opts, i, Dynamic
		}
		a := words[i]
		switch {
		case a == "--":
			return opts, i + 1, OK
		case a == "-" || !strings.HasPrefix(a, "-"):
			return opts, i, OK
		case t.Numeric && numeric(a):
			opts = append(opts, Option{Key: "n", Value: strings.TrimLeft(a, "-"), HasValue: true})
		case strings.HasPrefix(a, "--"):
			name, v, eq := strings.Cut(a[2:], "=")
			l, ok := t.resolve(name)
			if !ok || l.kind == None && eq {
				return opts, i, Unknown
			}
			o := Option{Key: l.key, Value: v, HasValue: eq}
			if l.kind == Required && !eq && !value(&o) {
				return opts, i, Unknown
			}
			opts = append(opts, o)
		default:
			var st Status
			if opts, st = t.cluster(a, opts, value); st != OK {
				return opts, i, st
			}
		}
		if n := len(opts); n > 0 && stop != "" && strings.Contains(" "+stop+" ", " "+opts[n-1].Key+" ") {
			return opts, i + 1, OK
		}
	}
	return opts, i, OK
}

// cluster reads a word of short options (-abc, -kVALUE).
func (t *Table) cluster(a string, opts []Option, value func(*Option) bool) ([]Option, Status) {
	for k := 1; k < len(a); k++ {
		kind, ok := t.shortKind(a[k])
		if !ok {
			return opts, Unknown
		}
		o := Option{Key: a[k : k+1]}
		if kind == None {
			opts = append(opts, o)
			continue
		}
		o.Value, o.HasValue = a[k+1:], k+1 < len(a)
		if kind == Required && !o.HasValue && !value(&o) {
			return opts, Unknown
		}
		return append(opts, o), OK
	}
	return opts, OK
}
