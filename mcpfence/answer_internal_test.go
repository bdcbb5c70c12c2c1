package mcpfence

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/ops"
)

// A call whose record's COMMIT went unanswered (the record's
// leases.ErrOutcomeUnknown: ops' own tests make one with a driver that
// loses the answer) is a tool error that says so and tells the agent to
// retry the same call, with _meta leases/failure "outcome unknown".
func TestUnknownOutcomeSaysRetryTheSameCall(t *testing.T) {
	call := ops.Call{Resource: "r", Epoch: 1, Key: "k"}
	res, _, err := answer[struct{}](call, ops.Result{}, fmt.Errorf("commit: %w", leases.ErrOutcomeUnknown))
	if err != nil || !res.IsError || res.Meta[MetaFailure] != "outcome unknown" {
		t.Fatalf("%+v, %v; want a tool error with _meta %s \"outcome unknown\"", res, err, MetaFailure)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `retry the same call, with the same key`) {
		t.Fatalf("%q does not tell the agent to retry the same call", text)
	}
}
