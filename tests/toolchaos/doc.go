// Package toolchaos is the chaos test of the tool path: agent processes
// that hold leases through sessions (package session, on a SQLite lease
// file) and call two tool servers, one over HTTP behind httpfence and
// one over MCP's streamable HTTP behind mcpfence, each a process of its
// own with its own SQLite database. Each server has two tools: one
// writing a row in the record's transaction (Handler), one appending a
// line to a file, an effect outside the database, through the pending
// record (External).
//
// The controller stops agents with SIGSTOP at random and as a call is
// about to go out after the session's check (so that it arrives after
// the next holder's), kills agents with SIGKILL and starts new ones,
// kills the tool servers (and so their databases) and restarts them, and
// cuts connections in TCP proxies between the agents and the servers as
// the answer comes back, after the server did the call, so that the
// agents retry with the same key.
//
// Every agent records its grants, renewals, releases and tool calls as
// JSON lines on its standard output (a history.Recorder); package
// history checks them with what the servers hold afterwards (the records,
// the rows, the lines, and every record's insert in commit order):
// each operation's effect at most once, no effect of an epoch below one
// already admitted, every answer from the record, every lost answer
// resolved by the record, and porcupine over the history.
package toolchaos
