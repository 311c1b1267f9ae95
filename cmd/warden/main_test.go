package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the golden files of the scripts under testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"warden": func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI scripts under testdata/script. Each script gets
// its own home and workspace.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"tamper": cmdTamper, "serve": cmdServe},
		Setup: func(env *testscript.Env) error {
			env.Setenv("WARDEN_HOME", filepath.Join(env.WorkDir, ".home"))
			env.Setenv("WARDEN_WORKSPACE", env.WorkDir)
			env.Setenv("WARDEN_LOCK_TIMEOUT", "2s")
			return nil
		},
	})
}
