package main

import (
	"fmt"
	"os"
)

// peakRSSMain: the peak memory of a child (getrusage) is not measured on
// Windows; the hostile corpus that uses it runs on unix only.
func peakRSSMain() {
	fmt.Fprintln(os.Stderr, "peakrss: not available on windows")
	os.Exit(127)
}
