package history

import "leases"

// lease is a lease of resource "r" as an answer shows it.
func lease(holder string, epoch, grantedAt, expiresAt int64) *leases.Lease {
	return &leases.Lease{Resource: "r", Holder: holder, Epoch: epoch, GrantedAt: grantedAt, ExpiresAt: expiresAt}
}

// server adds a call of worker on the server's clock (no tick given)
// that answered result with l (nil: no lease).
func (s *scripted) server(worker, op string, epoch, ttl int64, result string, l *leases.Lease) {
	s.op(worker, op, Record{Resource: "r", Epoch: epoch, TTL: ttl, ServerTime: true}, result, Record{Lease: l})
}

// guardedTx adds a transaction admitted by the server-clock guard, begun
// at tick, whose row committed with seq.
func (s *scripted) guardedTx(worker string, epoch, seq, tick int64) {
	id := worker + "/" + string(rune('0'+seq))
	s.op(worker, "tx", Record{Resource: "r", Epoch: epoch, OpID: id, ServerTime: true, Tick: tick}, ResultOK, Record{Seq: seq})
	s.h.Rows = append(s.h.Rows, Row{Resource: "r", Seq: seq, Epoch: epoch, Writer: worker, OpID: id})
	s.h.Counters["r"] = seq
	s.h.Fences["r"] = max(s.h.Fences["r"], epoch)
}
