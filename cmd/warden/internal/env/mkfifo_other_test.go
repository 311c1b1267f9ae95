//go:build !unix

package env

import "errors"

func syscallMkfifo(string) error { return errors.New("no FIFOs") }
