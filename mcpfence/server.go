package mcpfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/ops"
)

// TxHandlerFor is a typed tool handler (mcp.ToolHandlerFor) whose effect
// is rows in the server's database, written in tx: the transaction that
// also admits the call's epoch and records its answer.
type TxHandlerFor[In, Out any] func(ctx context.Context, tx *sql.Tx, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error)

// Handler wraps h, a tool whose effect is rows in table's database, for
// mcp.AddTool: each call runs through table's record (ops.Table.Do) in
// one transaction: the epoch is admitted, h writes its rows in tx, and
// its result is stored and committed with them, so that a retry of the
// call is answered from the record and never done twice. A call whose
// epoch is below the newest admitted, whose key was used for another
// call, or whose first call is still running, is answered with a tool
// error saying so (see Outcome). An error of h rolls everything back
// (nothing is recorded: a retry runs h again) and is the call's tool
// error, as the SDK makes it.
func Handler[In, Out any](table *ops.Table, h TxHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		call, err := callOf(req)
		if err != nil {
			return failure(call, err), zero, nil
		}
		var toolErr error
		result, err := table.Do(ctx, call, func(ctx context.Context, tx *sql.Tx) (ops.Response, error) {
			res, out, err := h(ctx, tx, req, in)
			if err != nil {
				toolErr = err
				return ops.Response{}, err
			}
			return stored(res, out)
		})
		if toolErr != nil {
			return nil, zero, toolErr
		}
		return answer[Out](call, result, err)
	}
}

// External wraps h, a tool whose effect is outside the database (a
// file, an email, a payment API), for mcp.AddTool: before h runs, the
// call's record is committed as pending (ops.Table.Begin); after, h's
// result, a tool error included, is stored as its answer. A retry is
// answered from the record: at most one effect per key. A retry while h
// runs, or after h's answer could not be recorded (the server died
// before Complete), is answered "in progress", forever in the latter
// case: the effect is unknown, never repeated. Stale and conflicting
// calls are refused as by Handler.
func External[In, Out any](table *ops.Table, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		call, err := callOf(req)
		if err != nil {
			var zero Out
			return failure(call, err), zero, nil
		}
		pending, result, err := table.Begin(ctx, call)
		if err != nil || pending == nil {
			return answer[Out](call, result, err)
		}
		res, out, err := h(ctx, req, in)
		var output any = out
		if err != nil {
			res, output = &mcp.CallToolResult{}, nil
			res.SetError(err)
		}
		response, err := stored(res, output)
		if err != nil {
			return failure(call, fmt.Errorf("%w: the effect was done, but its result could not be recorded: %v", leases.ErrOutcomeUnknown, err)), out, nil
		}
		result.Response = response
		if err := complete(context.WithoutCancel(ctx), pending, response); err != nil {
			// Answer what was done; a retry is told "in progress".
			res, out, _ := answer[Out](call, result, nil)
			res.Meta[MetaFailure] = "not recorded: " + err.Error()
			return res, out, nil
		}
		return answer[Out](call, result, nil)
	}
}

// complete records the answer of an effect that was done, even if the
// caller has gone (ctx does not end with the call), once more after an
// unknown outcome (Complete says a repeat with the same answer is safe).
func complete(ctx context.Context, pending *ops.Pending, response ops.Response) error {
	err := pending.Complete(ctx, response)
	if errors.Is(err, leases.ErrOutcomeUnknown) {
		err = pending.Complete(ctx, response)
	}
	return err
}
