package decode_test

import (
	"errors"
	"fmt"

	"github.com/wardenrt/warden/runtime/decode"
)

func ExampleYAML() {
	var policy struct {
		Version int      `yaml:"version"`
		Grants  []string `yaml:"grants"`
	}
	_, err := decode.YAML("policy.yaml", []byte("version: 1\ngrants: [\"fs.read:**\"]\n"), &policy, nil)
	fmt.Println(policy.Grants, err)

	// Four hundred bytes that stand for a hundred million values.
	bomb := "version: 1\ngrants: [&a [x, x, x, x, x, x, x, x, x, x], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], …]\n"
	_, err = decode.YAML("policy.yaml", []byte(bomb), &policy, nil)
	fmt.Println(err, errors.Is(err, decode.ErrInvalid))

	_, err = decode.YAML("policy.yaml", []byte("version: 1\ngrants: []\nversion: 2\n"), &policy, nil)
	fmt.Println(err)
	// Output:
	// [fs.read:**] <nil>
	// policy.yaml:2:10: YAML anchors (&name) are not allowed: write the value out (an anchor only serves aliases) true
	// policy.yaml:3:1: mapping key "version" already defined at [1:1]
}

func ExampleReadFile() {
	_, err := decode.ReadFile("/dev/zero", 0)
	fmt.Println(err, errors.Is(err, decode.ErrInvalid))
	// Output:
	// /dev/zero: is not a regular file (a device) true
}
