package main

import (
	_ "embed"
	"fmt"
	goruntime "runtime"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print warden's version",
		Flags: []cli.Flag{env.JSONFlag},
		Action: func(c *cli.Context) error {
			if env.WantJSON(c) {
				return env.WriteJSON(c.App.Writer, map[string]string{"version": version, "go": goruntime.Version(), "os": goruntime.GOOS, "arch": goruntime.GOARCH})
			}
			_, err := fmt.Fprintf(c.App.Writer, "warden %s (%s, %s/%s)\n", version, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
			return err
		},
	}
}

//go:embed completion/bash
var bashCompletion string

//go:embed completion/zsh
var zshCompletion string

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish (e.g. `source <(warden completion bash)`)",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash":
				_, err := fmt.Fprint(c.App.Writer, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(c.App.Writer, zshCompletion)
				return err
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(c.App.Writer, s)
				return err
			}
			return env.UsageErr("usage: warden completion bash|zsh|fish", "unknown shell %q", c.Args().First())
		},
	}
}
