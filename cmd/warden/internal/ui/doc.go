// Package ui is what warden shows a person on a terminal: text made safe
// to print, the terminal approver, and refusal hints worded for the
// command line or for an MCP client.
package ui
