package chaos

import (
	"testing"
	"time"

	"leases/tests/history"
)

// The starvation a worker records is what the checks subtract from a
// late Done: a stall counts in full in a window inside it, whatever small
// lateness came before it, and small lateness counts too, spread over its
// span.
func TestStarvationCountsEveryLatenessWhereItWas(t *testing.T) {
	const ms = time.Millisecond
	small := 300 * time.Microsecond
	for _, c := range []struct {
		name string
		// late is each tick's lateness, in order; the window is from
		// from after the last tick's due time to until after it.
		late        []time.Duration
		from, until time.Duration
		want        time.Duration
	}{
		{
			name: "a stall after small lateness and a short stall, the window inside it",
			late: append(append(repeat(small, 10), 2*ms), append(repeat(small, 5), 200*ms)...),
			from: 20 * ms, until: 200 * ms,
			want: 180 * ms,
		},
		{
			name: "a stall, the window from before its start to its end",
			late: append(repeat(small, 3), 200*ms),
			from: -5 * ms, until: 200 * ms,
			want: 200 * ms,
		},
		{
			name: "small lateness only",
			late: repeat(small, 100),
			// a window that spans of starvedFlush have covered: 0.3 ms
			// in every 5.3 ms
			from: -400 * ms, until: -150 * ms,
			want: 250 * ms * 3 / 53,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := time.Unix(1000, 0)
			m := starvationMeter{since: at}
			h := &history.History{}
			var due time.Time
			for _, late := range c.late {
				due = at.Add(starvationTick)
				at = due.Add(late)
				for _, r := range m.tick(due, at) {
					if err := h.Add("w", r); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := h.StarvedBetween("w", due.Add(c.from).UnixNano(), due.Add(c.until).UnixNano())
			if diff := got - c.want; diff < -c.want/20 || diff > c.want/20 {
				t.Errorf("starved %v in the window; want %v", got, c.want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		ds[i] = d
	}
	return ds
}
