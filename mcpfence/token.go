package mcpfence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"leases"
	"leases/ops"
)

// The keys of a call's token in the request's _meta, and of the answer's
// in the result's _meta.
const (
	// MetaResource is the resource whose lease the agent holds (a string).
	MetaResource = "leases/resource"
	// MetaEpoch is the lease's epoch, the fencing token (a JSON integer).
	MetaEpoch = "leases/epoch"
	// MetaKey is the operation's key within the epoch (a string): the
	// same key with the same tool and arguments is the same operation.
	MetaKey = "leases/key"
	// MetaOutcome, in a result, is what the record made of the call: a
	// leases.Outcome ("accepted", "replay", "conflict", "stale", "in
	// progress"). Read it with Outcome.
	MetaOutcome = "leases/outcome"
	// MetaNewestEpoch, in a stale call's result, is the newest epoch the
	// server has admitted for the resource.
	MetaNewestEpoch = "leases/newest-epoch"
	// MetaRetryAfter, in an in-progress call's result, is how many
	// seconds to wait before retrying the same call.
	MetaRetryAfter = "leases/retry-after"
	// MetaFailure, in the result of a call the record could not answer,
	// says which failure it was: "failed" (nothing was committed) or
	// "outcome unknown" (retry the same call: the record tells).
	MetaFailure = "leases/failure"
)

// callOf reads the token of req's _meta and what makes the call the
// operation it is (the tool's name and its arguments), or says in one
// line what is missing or malformed.
func callOf(req *mcp.CallToolRequest) (ops.Call, error) {
	meta := req.Params.Meta
	var p problems
	resource, ok := meta[MetaResource].(string)
	p.check(meta, MetaResource, "a non-empty string", ok && resource != "")
	epoch, ok := epochOf(meta[MetaEpoch])
	p.check(meta, MetaEpoch, "a positive integer", ok)
	key, ok := meta[MetaKey].(string)
	p.check(meta, MetaKey, "a non-empty string", ok && key != "")
	if said := p.String(); said != "" {
		return ops.Call{}, fmt.Errorf("%w: %s: call %q through a lease's session (mcpfence.Client), which attaches them",
			leases.ErrInvalidInput, said, req.Params.Name)
	}
	request, err := operation(req.Params.Name, req.Params.Arguments)
	if err != nil {
		return ops.Call{}, fmt.Errorf("%w: arguments of %q: %v", leases.ErrInvalidInput, req.Params.Name, err)
	}
	return ops.Call{Resource: resource, Epoch: epoch, Key: key, Request: request}, nil
}

// problems are the token's keys that are missing or malformed.
type problems struct{ missing, malformed []string }

// check notes key as missing from meta, or as malformed unless ok (shape
// says what it should be).
func (p *problems) check(meta mcp.Meta, key, shape string, ok bool) {
	switch {
	case meta[key] == nil:
		p.missing = append(p.missing, key)
	case !ok:
		p.malformed = append(p.malformed, key+" ("+shape+")")
	}
}

// String says in one line what is missing and what is malformed, or "".
func (p *problems) String() string {
	var said []string
	if len(p.missing) > 0 {
		said = append(said, "missing _meta "+strings.Join(p.missing, ", "))
	}
	if len(p.malformed) > 0 {
		said = append(said, "malformed _meta "+strings.Join(p.malformed, ", "))
	}
	return strings.Join(said, "; ")
}

// epochOf reads an epoch as JSON decodes it: a positive integer.
func epochOf(v any) (int64, bool) {
	switch v := v.(type) {
	case float64:
		if v >= 1 && v <= 1<<53 && v == math.Trunc(v) {
			return int64(v), true
		}
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= 1 {
			return n, true
		}
	case int64:
		return v, v >= 1
	}
	return 0, false
}

// operation is what makes a call the operation it is: the tool's name
// and its arguments in a canonical form (keys sorted, no spaces, numbers
// as written), so that a retry is recognised whoever encoded it.
func operation(tool string, arguments json.RawMessage) ([]byte, error) {
	canonical := []byte("null")
	if len(bytes.TrimSpace(arguments)) > 0 {
		decoder := json.NewDecoder(bytes.NewReader(arguments))
		decoder.UseNumber()
		var v any
		if err := decoder.Decode(&v); err != nil {
			return nil, err
		}
		var err error
		if canonical, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return append(append([]byte(tool), 0), canonical...), nil
}

// derivedKey is the key of a call that its caller did not name: the
// same tool, arguments and epoch give the same key, so that a retry is
// the same operation.
func derivedKey(request []byte, epoch int64) string {
	h := sha256.New()
	h.Write(request)
	fmt.Fprintf(h, "\x00%d", epoch)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
