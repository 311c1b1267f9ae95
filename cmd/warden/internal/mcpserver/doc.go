// Package mcpserver is `warden mcp serve`: warden's tools for MCP
// clients over stdio or streamable HTTP, each call through the gate, with
// approvals asked of the person behind the client.
package mcpserver
