package env

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestHomeFor: the default home follows each system's convention.
func TestHomeFor(t *testing.T) {
	env := map[string]string{"XDG_DATA_HOME": "/xdg", "LocalAppData": `C:\Users\me\AppData\Local`}
	getenv := func(k string) string { return env[k] }
	home := func() (string, error) { return "/home/me", nil }
	for _, tc := range []struct{ goos, want string }{
		{"linux", "/xdg/warden"},
		{"freebsd", "/xdg/warden"},
		{"darwin", "/home/me/Library/Application Support/warden"},
		{"windows", filepath.Join(`C:\Users\me\AppData\Local`, "warden")},
	} {
		if got, err := homeFor(tc.goos, getenv, home); err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.goos, got, err, tc.want)
		}
	}
	delete(env, "XDG_DATA_HOME")
	if got, _ := homeFor("linux", getenv, home); got != "/home/me/.local/share/warden" {
		t.Errorf("linux without XDG_DATA_HOME: %q", got)
	}
	delete(env, "LocalAppData")
	if _, err := homeFor("windows", getenv, home); err == nil {
		t.Error("windows without LocalAppData: no error")
	}
	if _, err := homeFor("linux", getenv, func() (string, error) { return "", errors.New("no home") }); err == nil {
		t.Error("no home directory: no error")
	}
}
