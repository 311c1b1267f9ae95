// Command hello is the baseline of BenchmarkProcessStart: the smallest Go
// program that starts, prints a line and exits.
package main

import (
	"fmt"
	"runtime"
)

func main() {
	fmt.Printf("hello (%s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
