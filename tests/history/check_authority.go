package history

import "fmt"

// grants are the epochs granted: by resource and epoch, the holders of
// the acquires that returned them.
func grants(h *History) map[key][]string {
	g := map[key][]string{}
	for _, op := range h.opsOf("acquire", ResultOK) {
		l := op.Ret.Lease
		g[key{l.Resource, l.Epoch}] = append(g[key{l.Resource, l.Epoch}], l.Holder)
	}
	return g
}

func epochsGrantedOnce(h *History) []string {
	var bad []string
	for k, holders := range grants(h) {
		if len(holders) > 1 {
			bad = append(bad, fmt.Sprintf("epoch %d of %s granted %d times: to %v", k.epoch, k.resource, len(holders), holders))
		}
	}
	return bad
}

func noInvalidInput(h *History) []string {
	var bad []string
	for _, op := range h.Ops {
		if op.Result() == ResultInvalid {
			bad = append(bad, fmt.Sprintf("%s: %s refused as invalid input: %s", op.Worker, op.Call.Op, op.Ret.Err))
		}
	}
	return bad
}
