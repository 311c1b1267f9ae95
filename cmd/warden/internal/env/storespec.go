package env

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// StoreSpec is a parsed --store value.
type StoreSpec struct {
	Kind string // "bbolt" or "postgres"
	Path string // bbolt: the database file
	URL  string // postgres
}

// ParseStoreSpec reads a --store value: "" or "bbolt" (the file in home),
// "bbolt:PATH", or a postgres:// (postgresql://) URL.
func ParseStoreSpec(s, home string) (StoreSpec, error) {
	switch {
	case s == "" || s == "bbolt":
		return StoreSpec{Kind: "bbolt", Path: filepath.Join(home, "warden.db")}, nil
	case strings.HasPrefix(s, "bbolt:"):
		p := strings.TrimPrefix(s, "bbolt:")
		if p == "" {
			return StoreSpec{}, UsageErr("write bbolt:PATH", "--store bbolt: needs a path")
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return StoreSpec{}, UsageErr("", "--store %s: %v", s, err)
		}
		return StoreSpec{Kind: "bbolt", Path: abs}, nil
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		return StoreSpec{Kind: "postgres", URL: s}, nil
	}
	return StoreSpec{}, UsageErr("use bbolt, bbolt:PATH or postgres://USER@HOST:PORT/DB", "--store %q: unknown store", redactURL(s))
}

// storePassword returns the password a --store URL carries, if any, so
// that it is redacted wherever it might appear.
func storePassword(s string) []string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return nil
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return []string{pw}
	}
	return nil
}

// redactURL hides a password in a URL-like string.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return s
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// StoreSpec is the store --store (WARDEN_STORE) names.
func (e *Env) StoreSpec() (StoreSpec, error) {
	return ParseStoreSpec(GlobalString(e.c, "store"), e.home)
}

// OwnPaths are the files warden keeps for its owner, which no tool and no
// program may read or change whatever the grants: the home, a bbolt store
// kept elsewhere (--store bbolt:PATH) and its audit anchor, and a policy
// named with --policy.
func (e *Env) OwnPaths() []string {
	out := []string{e.home}
	if spec, err := e.StoreSpec(); err == nil && spec.Kind != "postgres" && spec.Path != "" {
		out = append(out, spec.Path, filepath.Join(filepath.Dir(spec.Path), "audit.head"))
	}
	if f := GlobalString(e.c, "policy"); f != "" {
		if abs, err := filepath.Abs(f); err == nil {
			out = append(out, abs)
		}
	}
	return out
}

// openStore opens the store --store names. A PostgreSQL store keeps this
// host's audit anchors under <home>/anchors; WARDEN_HOST names the host
// (default: its host name).
func (e *Env) openStore() (store.Backend, error) {
	spec, err := e.StoreSpec()
	if err != nil {
		return nil, err
	}
	if spec.Kind == "postgres" {
		return postgres.Open(e.Context(), spec.URL, &postgres.Options{AnchorDir: filepath.Join(e.home, "anchors"), Host: os.Getenv("WARDEN_HOST")})
	}
	timeout := DefaultLockTimeout
	if e.c != nil {
		timeout = e.c.Duration("lock-timeout")
	}
	return store.OpenContext(e.Context(), spec.Path, &store.Options{Timeout: timeout})
}
