package main

// unreachable executes the wasm `unreachable` instruction
// (unreachable_wasm.s).
func unreachable()
