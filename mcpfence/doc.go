// Package mcpfence fences the tools of an MCP server (on the official Go
// SDK, github.com/modelcontextprotocol/go-sdk) by the lease of the agent
// that calls them: a call carries the agent's token in its _meta
// (MetaResource, MetaEpoch, MetaKey), and the server runs each call
// through a record per (resource, epoch, key) in its own database
// (package leases/ops).
//
// On the server, wrap each typed tool handler for mcp.AddTool: Handler
// for a tool whose effect is rows in the server's database (they commit
// with the record, in one transaction), External for an effect outside
// it (the record is committed as pending before it and completed after).
// The answers, each a CallToolResult whose _meta MetaOutcome says which
// (read it with Outcome):
//
//   - done now (leases.Accepted): the tool's result, stored;
//   - a retry of a call already done (leases.Replay): the stored result,
//     the tool not run again;
//   - the same key with another tool or other arguments
//     (leases.Conflict), an epoch below the newest the server has
//     admitted for the resource (leases.Stale, MetaNewestEpoch says which)
//     and a retry while the first call runs (leases.InProgress,
//     MetaRetryAfter): tool errors (IsError) whose text tells the agent
//     what to do: use a new key; stop; retry later.
//
// A call without a token, or with a malformed one, is a tool error that
// says what is missing, and does nothing.
//
// On the agent, Client wraps an *mcp.ClientSession for the holder of a
// *session.Session: it attaches the session's token and an operation key
// (named with WithKey, or derived from the tool, its arguments and the
// epoch: the same on a retry), and refuses to call once the session has
// ended.
//
// What it guarantees: at most one effect per (resource, epoch, key), and
// no effect of a call whose epoch is below one the server has already
// admitted. What it cannot: an outside effect whose completion was lost
// (the server died between the effect and its record) is unknown, and
// stays "in progress" for that key: never repeated, never reported done.
package mcpfence
