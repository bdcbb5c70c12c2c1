package report

import (
	"fmt"
	"strings"

	"leases/evidence/explore"
	"leases/evidence/results"
)

// scenarioTable lists every scenario once: its receiver, what held on the
// first backend it ran on, the final record, and the backends it ran on.
func scenarioTable(doc *results.Results) string {
	var b strings.Builder
	b.WriteString("| scenario | receiver | what the run shows | final record | ran on |\n|---|---|---|---|---|\n")
	seen := map[string]bool{}
	for _, first := range doc.Backends {
		for _, sc := range first.Scenarios {
			if seen[sc.Name] {
				continue
			}
			seen[sc.Name] = true
			var ranOn []string
			for _, other := range doc.Backends {
				for _, o := range other.Scenarios {
					if o.Name == sc.Name {
						ranOn = append(ranOn, other.Backend)
					}
				}
			}
			final := record(sc.Final)
			if sc.FinalToolEffects != nil {
				final = fmt.Sprintf("tool effects: %d, one per operation", len(sc.FinalToolEffects))
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", sc.Name, sc.Receiver,
				strings.Join(sc.Verdicts.Claims(), ", "), final, strings.Join(ranOn, ", "))
		}
	}
	return b.String()
}

// agreementTable says, for every scenario that ran on several backends,
// whether it ran the same on each.
func agreementTable(doc *results.Results) string {
	var b strings.Builder
	b.WriteString("| scenario | backends | same steps and verdicts |\n|---|---|---|\n")
	for _, a := range doc.Agreement {
		fmt.Fprintf(&b, "| `%s` | %s | %v |\n", a.Scenario, strings.Join(a.Backends, ", "), a.Same)
	}
	return b.String()
}

// explorationTable is one backend's explored figures, protocol by
// protocol, under the bounds they were explored with.
func explorationTable(b results.Backend) string {
	var out strings.Builder
	bounds := b.Exploration.Bounds
	fmt.Fprintf(&out, "Bounds on %s: %d workers, a time-to-live of %d ticks, the clock from tick 0 to %d.\n\n",
		b.Backend, bounds.Workers, bounds.TTL, bounds.LastTick)
	out.WriteString("| protocol | schedules | I1 | I2 | I3 | I4 | I5 | lost updates | gaps | stale after the new holder's read |\n")
	out.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range b.Exploration.Protocols {
		v := p.Violations
		fmt.Fprintf(&out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Protocol, number(p.Schedules),
			number(v.I1), number(v.I2), number(v.I3), number(v.I4), number(v.I5),
			number(p.LostUpdates), number(p.Gaps), afterRead(p))
	}
	return out.String()
}

func afterRead(p explore.ProtocolFigures) string {
	if p.StaleAfterRead == nil {
		return "n/a"
	}
	return "**" + number(*p.StaleAfterRead) + "**"
}

// number writes n with a comma between thousands, as the prose does.
func number(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// toolTable is the explored model of operations on every backend: its
// bounds and, per variant, its figures.
func toolTable(doc *results.Results) string {
	var out strings.Builder
	out.WriteString("| backend | operations a tenure, sends each | variant | schedules | with a resend | double effects | stale effects |\n")
	out.WriteString("|---|---|---|---:|---:|---:|---:|\n")
	for _, b := range doc.Backends {
		tool := b.Exploration.Tool
		if tool == nil {
			continue
		}
		for _, v := range tool.Variants {
			fmt.Fprintf(&out, "| %s | %d, %d | %s | %s | %s | **%s** | **%s** |\n", b.Backend, tool.Bounds.Operations,
				tool.Bounds.Sends, v.Variant, number(v.Schedules), number(v.Resent), number(v.DoubleEffects), number(v.StaleEffects))
		}
	}
	return out.String()
}
