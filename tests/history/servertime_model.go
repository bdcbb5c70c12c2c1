package history

// stepServer is the model's transition for a call whose tick the server
// chose (Input.ServerTime): the states the call may leave, given what it
// answered, none if no tick makes the answer right. Where the answer
// determines the tick (a grant's GrantedAt; a renewal's ExpiresAt-TTL,
// unless the never-earlier rule kept the old expiry) the call is step's
// with that tick. Where it does not (a refusal, a release, a renewal
// that kept the old expiry) any tick consistent with the state is
// accepted: at or after LastTick (a server-clock lessor never runs a
// tick backwards), and before ExpiresAt for an answer that the lease is
// live, at or after it for one that it expired. Of the ticks a release
// may have had, the state keeps the earliest, LastTick: every later
// answer that some release tick allows, that one allows too.
//
// A guarded transaction (op "tx") is step's, and must also come before
// any newer grant of its resource: the guard's lock on the lease row
// holds a grant back until the transaction has ended.
func (s modelState) stepServer(in Input, got Output) []any {
	unknown := got.Result == ResultUnknown || got.Result == ResultKilled
	if in.Op != "acquire" && in.Op != "renew" && in.Op != "release" && in.Op != "holder" {
		if in.Op == "tx" && got.Result == ResultOK && in.Epoch < s.Epoch {
			return nil // committed after the grant of a newer epoch
		}
		in.ServerTime = false
		next, want := s.step(in)
		if !matches(in, want, got) {
			return nil
		}
		return []any{next}
	}
	mine := s.Epoch != 0 && s.Held && s.Epoch == in.Epoch && s.Holder == in.Holder
	// canBeLive: some tick at or after LastTick is before ExpiresAt.
	canBeLive := s.Held && (s.Vague || s.LastTick < s.ExpiresAt)
	switch {
	case in.Op == "acquire" && got.Result == ResultOK,
		in.Op == "acquire" && unknown && got.Epoch != 0:
		// A grant at its GrantedAt. A vague lease (its ticks unknown) may
		// have expired at any tick: accept the grant if the rest fits.
		at := s
		if at.Vague {
			at.Vague, at.Held, at.LastTick = false, false, min(at.LastTick, got.GrantedAt)
		}
		in.Now = got.GrantedAt
		next, want := at.step(in)
		if unknown {
			if want.Result != ResultOK || got.Epoch != want.Epoch {
				return []any{s}
			}
			return []any{s, next}
		}
		if !matches(in, want, got) {
			return nil
		}
		return []any{next}
	case in.Op == "acquire" && unknown:
		// Not granted, or granted at a tick no answer shows: at a tick at
		// or after every tick so far, when the lease has expired.
		granted := s
		granted.Epoch++
		granted.Holder, granted.Held, granted.GrantedAt, granted.ExpiresAt, granted.Vague = in.Holder, true, 0, 0, true
		return []any{s, granted}
	case in.Op == "acquire" && got.Result == ResultHeld, in.Op == "holder" && got.Result == ResultOK:
		// The live lease, at a tick before its expiry.
		if !canBeLive || got.Epoch != s.Epoch || got.Holder != s.Holder {
			return nil
		}
		if s.Vague {
			s.Vague, s.GrantedAt, s.ExpiresAt = false, got.GrantedAt, got.ExpiresAt
			return []any{s}
		}
		if got.GrantedAt != s.GrantedAt || got.ExpiresAt != s.ExpiresAt {
			return nil
		}
		return []any{s}
	case in.Op == "holder" && got.Result == ResultNone:
		return []any{s} // at a tick when no lease is live: always one
	case in.Op == "renew" && got.Result == ResultOK:
		if !mine || !canBeLive {
			return nil
		}
		if s.Vague {
			// A renewal whose answer was lost set the expiry at some
			// tick: this answer shows the lease as it stands.
			s.Vague, s.GrantedAt, s.ExpiresAt = false, got.GrantedAt, got.ExpiresAt
			return []any{s}
		}
		in.Now = got.ExpiresAt - in.TTL
		if next, want := s.step(in); matches(in, want, got) {
			return []any{next}
		}
		// The never-earlier rule kept the old expiry: renewed at a tick
		// from LastTick to ExpiresAt-TTL.
		if got.ExpiresAt == s.ExpiresAt && got.GrantedAt == s.GrantedAt && s.LastTick+in.TTL <= s.ExpiresAt &&
			got.Epoch == s.Epoch && got.Holder == s.Holder {
			return []any{s}
		}
		return nil
	case in.Op == "release" && got.Result == ResultOK:
		if !mine || !canBeLive {
			return nil
		}
		s.Holder, s.Held, s.ExpiresAt, s.Vague = "", false, s.LastTick, false
		return []any{s}
	case (in.Op == "renew" || in.Op == "release") && unknown:
		if !mine {
			return []any{s}
		}
		changed := s
		if in.Op == "release" {
			changed.Holder, changed.Held, changed.ExpiresAt, changed.Vague = "", false, s.LastTick, false
		} else {
			changed.Vague = true // a later expiry, at a tick no answer shows
		}
		return []any{s, changed}
	case (in.Op == "renew" || in.Op == "release") && got.Result == ResultExpired:
		// At a tick at or after the expiry: always one.
		if !mine {
			return nil
		}
		return []any{s}
	case (in.Op == "renew" || in.Op == "release") && got.Result == ResultNotHolder:
		if mine {
			return nil
		}
		return []any{s}
	}
	// Any other answer (a tick that ran backwards, above all) is not
	// one that a lessor on the server's clock gives.
	return nil
}
