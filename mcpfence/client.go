package mcpfence

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/session"
)

// Client calls tools of an MCP server for the holder of a lease: each
// call carries the session's token (resource and epoch) and an operation
// key in its _meta, for a server whose tools are wrapped by Handler or
// External.
type Client struct {
	cs *mcp.ClientSession
	s  *session.Session
}

// NewClient returns a client that calls cs's tools under s's lease.
func NewClient(cs *mcp.ClientSession, s *session.Session) *Client {
	return &Client{cs: cs, s: s}
}

// keyContext is the context key of WithKey.
type keyContext struct{}

// WithKey returns a context under which Client.CallTool gives its call
// key as the operation's key. Without it the key is derived from the
// tool's name, its arguments and the epoch: a retry of the same call is
// then the same operation (answered from the server's record, never done
// twice), and so is a second call with the same arguments under the same
// epoch. Name the keys of operations that may repeat on purpose.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyContext{}, key)
}

// CallTool calls the tool as mcp.ClientSession.CallTool does, with the
// session's token and the operation's key added to a copy of params's
// _meta. It refuses, before anything is sent, once the session has ended
// (an error matching session.ErrEnded), and when the arguments do not
// encode as JSON (leases.ErrInvalidInput). Read what the server's record
// made of the call with Outcome. Call under s.Context() for a call to be
// cut off when the session ends; one that was sent all the same (an agent
// paused between the check and the send) is the server's to refuse.
func (c *Client) CallTool(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if err := c.s.Check(); err != nil {
		return nil, fmt.Errorf("mcpfence: %s not called: %w", params.Name, err)
	}
	epoch := c.s.Epoch()
	key, _ := ctx.Value(keyContext{}).(string)
	if key == "" {
		arguments, err := json.Marshal(params.Arguments)
		if err != nil {
			return nil, fmt.Errorf("%w: mcpfence: arguments of %s: %v", leases.ErrInvalidInput, params.Name, err)
		}
		request, err := operation(params.Name, arguments)
		if err != nil {
			return nil, fmt.Errorf("%w: mcpfence: arguments of %s: %v", leases.ErrInvalidInput, params.Name, err)
		}
		key = derivedKey(request, epoch)
	}
	p := *params
	p.Meta = maps.Clone(params.Meta)
	if p.Meta == nil {
		p.Meta = mcp.Meta{}
	}
	p.Meta[MetaResource] = c.s.Lease().Resource
	p.Meta[MetaEpoch] = epoch
	p.Meta[MetaKey] = key
	return c.cs.CallTool(ctx, &p)
}
