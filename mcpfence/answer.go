package mcpfence

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/ops"
)

// resultType is the record's Response.Type for a stored tool result.
const resultType = "application/json"

// Outcome is what the record made of the call whose result res is (the
// result's _meta MetaOutcome): leases.Accepted for a call done now,
// leases.Replay for a stored answer, leases.Conflict, leases.Stale or
// leases.InProgress for a refusal; "" for a result that the record did
// not answer (a missing token, a failure, a tool without the wrapper).
func Outcome(res *mcp.CallToolResult) leases.Outcome {
	if res == nil {
		return ""
	}
	o, _ := res.Meta[MetaOutcome].(string)
	return leases.Outcome(o)
}

// stored is the record's Response for a tool's result: the result as the
// SDK sends it (its structured content, and the text of it when the tool
// left Content empty), without the outcome, which each answer adds.
func stored(res *mcp.CallToolResult, out any) (ops.Response, error) {
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if out != nil && !res.IsError {
		structured, err := json.Marshal(out)
		if err != nil {
			return ops.Response{}, fmt.Errorf("mcpfence: marshal the tool's output: %w", err)
		}
		res.StructuredContent = json.RawMessage(structured)
		if res.Content == nil && len(structured) > 0 && structured[0] == '{' {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(structured)}}
		}
	}
	body, err := json.Marshal(res)
	if err != nil {
		return ops.Response{}, fmt.Errorf("mcpfence: marshal the tool's result: %w", err)
	}
	return ops.Response{Status: 200, Type: resultType, Body: body}, nil
}

// answer is the tool's answer for what the record said: the stored
// result (Accepted, Replay) with its typed output, a refusal, or a
// failure.
func answer[Out any](call ops.Call, result ops.Result, err error) (*mcp.CallToolResult, Out, error) {
	var out Out
	if err != nil {
		return failure(call, err), out, nil
	}
	switch result.Outcome {
	case leases.Accepted, leases.Replay:
		res, err := decode(result.Response.Body, &out)
		if err != nil {
			return failure(call, err), out, nil
		}
		return mark(res, result.Outcome), out, nil
	case leases.Stale:
		res := refusal(result.Outcome, "stale: epoch %d of %q is below %d, the newest this server has admitted: "+
			"this agent's lease has passed to another holder; stop, and do not retry", call.Epoch, call.Resource, result.Newest)
		res.Meta[MetaNewestEpoch] = result.Newest
		return res, out, nil
	case leases.Conflict:
		return refusal(result.Outcome, "conflict: key %q was used under epoch %d for another call (another tool or other arguments): "+
			"a new operation needs a new key", call.Key, call.Epoch), out, nil
	case leases.InProgress:
		res := refusal(result.Outcome, "in progress: the call with key %q has not finished, or its outcome is unknown: "+
			"retry the same call, with the same key, later; it will not be done twice", call.Key)
		res.Meta[MetaRetryAfter] = 1
		return res, out, nil
	}
	return failure(call, fmt.Errorf("the record answered %q", result.Outcome)), out, nil
}

// decode reads a stored result and its structured content into out.
func decode(body []byte, out any) (*mcp.CallToolResult, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("read the stored result: %w", err)
	}
	var structured struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(body, &structured); err != nil {
		return nil, fmt.Errorf("read the stored result: %w", err)
	}
	if len(structured.StructuredContent) > 0 {
		if err := json.Unmarshal(structured.StructuredContent, out); err != nil {
			return nil, fmt.Errorf("read the stored output: %w", err)
		}
	}
	return &res, nil
}

// mark says in res's _meta what the record made of the call.
func mark(res *mcp.CallToolResult, o leases.Outcome) *mcp.CallToolResult {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaOutcome] = string(o)
	return res
}

// refusal is a tool error whose text says what the agent should do.
func refusal(o leases.Outcome, format string, args ...any) *mcp.CallToolResult {
	return mark(toolError(fmt.Sprintf(format, args...)), o)
}

// failure is a tool error for a call the record could not answer: a
// missing or malformed token, a failure before commit (nothing was
// done), or an unknown outcome (the record tells, on a retry).
func failure(call ops.Call, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, leases.ErrInvalidInput):
		return toolError(err.Error())
	case errors.Is(err, leases.ErrOutcomeUnknown):
		res := toolError(fmt.Sprintf("outcome unknown: the call with key %q may or may not have been done (%v): "+
			"retry the same call, with the same key: the record answers it, never doing it twice", call.Key, err))
		res.Meta = mcp.Meta{MetaFailure: "outcome unknown"}
		return res
	}
	res := toolError(fmt.Sprintf("failed: nothing was done (%v): retrying the same call is safe", err))
	res.Meta = mcp.Meta{MetaFailure: "failed"}
	return res
}

// toolError is a tool error result with text.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
