// Command scaleplot draws the scale benchmark's results (tests/scale) as
// an SVG: for each measure, one line per series (a label given on the
// command line and a backend), against the number of leases, both axes
// logarithmic.
//
//	go run ./tools/scaleplot -o docs/scale.svg before=docs/scale-before.json after=docs/scale-after.json
//
// Each argument is label=file, a file written by the benchmark
// (LEASES_SCALE_OUT). The same input gives the same bytes. With -table,
// it writes the rows as a Markdown table instead (docs/performance.md).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// row is the part of the benchmark's row that the plot reads.
type row struct {
	Backend       string  `json:"backend"`
	Leases        int     `json:"leases"`
	Holders       int     `json:"holders"`
	Processes     int     `json:"processes"`
	RoundMillis   float64 `json:"round_ms"`
	RoundRequests float64 `json:"round_requests"`
	RoundBytes    float64 `json:"round_bytes"`
	RenewCPUus    float64 `json:"renew_cpu_us"`
	GrantsPerSec  float64 `json:"grants_per_sec"`
	AcquireP50us  float64 `json:"acquire_p50_us"`
	AcquireP99us  float64 `json:"acquire_p99_us"`
	WriteP50us    float64 `json:"write_p50_us"`
	WriteP99us    float64 `json:"write_p99_us"`
	HeapPerLease  float64 `json:"heap_bytes_per_lease"`
	RoundErrors   int     `json:"round_errors"`
}

// measure is one panel of the plot.
type measure struct {
	title string
	value func(row) float64
}

var measures = []measure{
	{"requests per renewal round", func(r row) float64 { return r.RoundRequests }},
	{"renewal round, ms", func(r row) float64 { return r.RoundMillis }},
	{"client CPU per renewal, µs", func(r row) float64 { return r.RenewCPUus }},
	{"grants per second", func(r row) float64 { return r.GrantsPerSec }},
}

// series is one line: its name and its points, sorted by leases.
type series struct {
	name   string
	points [][2]float64
}

func main() {
	out := flag.String("o", "", "the SVG file to write (default: standard output)")
	asTable := flag.Bool("table", false, "write a Markdown table, not an SVG")
	flag.Parse()
	all, err := load(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(2)
	}
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaleplot:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	if *asTable {
		table(w, all)
		return
	}
	draw(w, all)
}

// table writes every row as a line of a Markdown table, by series.
func table(w io.Writer, all map[string][]row) {
	fmt.Fprintln(w, "| series | L | H | P | grants/s | Acquire p50/p99 ms | round ms | requests/round | bytes/round | CPU µs/renewal | write p50/p99 ms | heap B/lease | failed renewals |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	counted := func(v float64) string { // -1 where not counted; PostgreSQL's bytes are not counted (0)
		if v <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, name := range names {
		for _, r := range all[name] {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %.0f | %.1f / %.0f | %.0f | %s | %s | %.0f | %.1f / %.0f | %.0f | %d |\n",
				name, r.Leases, r.Holders, r.Processes, r.GrantsPerSec, r.AcquireP50us/1000, r.AcquireP99us/1000,
				r.RoundMillis, counted(r.RoundRequests), counted(r.RoundBytes), r.RenewCPUus,
				r.WriteP50us/1000, r.WriteP99us/1000, r.HeapPerLease, r.RoundErrors)
		}
	}
}

// load reads label=file arguments into rows by series name.
func load(args []string) (map[string][]row, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no label=file given")
	}
	all := map[string][]row{}
	for _, arg := range args {
		label, file, ok := strings.Cut(arg, "=")
		if !ok || label == "" || file == "" {
			return nil, fmt.Errorf("%q is not label=file", arg)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var rows []row
		if err := json.Unmarshal(data, &rows); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, r := range rows {
			name := label + " " + r.Backend
			all[name] = append(all[name], r)
		}
	}
	return all, nil
}

const (
	panelW, panelH = 420, 260
	margin         = 50
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"}

func draw(w io.Writer, all map[string][]row) {
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	width, height := 2*(panelW+margin)+margin, 2*(panelH+margin)+margin+18*len(names)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	for i, m := range measures {
		x0, y0 := margin+(i%2)*(panelW+margin), margin+(i/2)*(panelH+margin)
		var lines []series
		for _, name := range names {
			s := series{name: name}
			for _, r := range all[name] {
				if v := m.value(r); v > 0 {
					s.points = append(s.points, [2]float64{float64(r.Leases), v})
				}
			}
			sort.Slice(s.points, func(a, b int) bool { return s.points[a][0] < s.points[b][0] })
			lines = append(lines, s)
		}
		panel(w, x0, y0, m.title, lines)
	}
	for i, name := range names {
		y := 2*(panelH+margin) + margin + 18*i
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", margin, y, margin+30, y, colors[i%len(colors)])
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", margin+36, y+4, name)
	}
	fmt.Fprintln(w, `</svg>`)
}

// panel draws one measure against leases, both on log axes.
func panel(w io.Writer, x0, y0 int, title string, lines []series) {
	lo, hi := [2]float64{math.Inf(1), math.Inf(1)}, [2]float64{math.Inf(-1), math.Inf(-1)}
	for _, s := range lines {
		for _, p := range s.points {
			for k := range 2 {
				lo[k], hi[k] = math.Min(lo[k], math.Log10(p[k])), math.Max(hi[k], math.Log10(p[k]))
			}
		}
	}
	for k := range 2 {
		lo[k], hi[k] = math.Floor(lo[k]), math.Max(math.Ceil(hi[k]), math.Floor(lo[k])+1)
	}
	at := func(p [2]float64) (float64, float64) {
		return float64(x0) + (math.Log10(p[0])-lo[0])/(hi[0]-lo[0])*panelW,
			float64(y0+panelH) - (math.Log10(p[1])-lo[1])/(hi[1]-lo[1])*panelH
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="13">%s</text>`+"\n", x0, y0-10, title)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, panelW, panelH)
	for e := lo[1]; e <= hi[1]; e++ {
		_, y := at([2]float64{math.Pow(10, lo[0]), math.Pow(10, e)})
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, y, x0+panelW, y, x0-4, y+4, tick(e))
	}
	for e := lo[0]; e <= hi[0]; e++ {
		x, _ := at([2]float64{math.Pow(10, e), math.Pow(10, lo[1])})
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+14, tick(e))
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">leases</text>`+"\n", x0+panelW/2, y0+panelH+28)
	for i, s := range lines {
		if len(s.points) == 0 {
			continue
		}
		var path strings.Builder
		for j, p := range s.points {
			x, y := at(p)
			fmt.Fprintf(&path, "%s%.1f,%.1f ", map[bool]string{true: "M", false: "L"}[j == 0], x, y)
		}
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(path.String()), colors[i%len(colors)])
	}
}

// tick is the label of 10^e.
func tick(e float64) string {
	v := math.Pow(10, e)
	if v >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}
