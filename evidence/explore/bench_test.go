package explore

import (
	"context"
	"testing"
)

// BenchmarkExplore times the exploration at the default bounds: what it
// adds to the reproduction command.
func BenchmarkExplore(b *testing.B) {
	var schedules int64
	var stats Stats
	for b.Loop() {
		ex, s, err := Explore(context.Background(), sqlite, DefaultBounds)
		if err != nil {
			b.Fatal(err)
		}
		schedules, stats = 0, s
		for _, p := range ex.Protocols {
			schedules += p.Schedules
		}
	}
	seconds := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(schedules)/seconds, "schedules/s")
	b.ReportMetric(float64(stats.StepsRun)/seconds, "real-steps/s")
}
