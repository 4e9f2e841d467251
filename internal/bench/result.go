package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Result is one measurement beside its reference.
type Result struct {
	Name    string  `json:"name"`
	Unit    string  `json:"unit"`
	Ours    float64 `json:"ours"`
	RefName string  `json:"reference_name,omitempty"`
	Ref     float64 `json:"reference,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"` // Ours / Ref (higher is better for rates)
	Seed    string  `json:"seed,omitempty"`  // the original's figure, for the report
	Note    string  `json:"note,omitempty"`
}

// Report collects results.
type Report struct {
	Bench   string    `json:"bench"`
	Started time.Time `json:"started"`
	Params  string    `json:"params"`
	Results []Result  `json:"results"`
}

func (r *Report) add(res Result) {
	if res.Ref > 0 {
		res.Ratio = res.Ours / res.Ref
	}
	r.Results = append(r.Results, res)
}

// Print writes a human table (or JSON).
func (r *Report) Print(w io.Writer, asJSON bool) {
	if asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "plasma-bench %s (%s)\n", r.Bench, r.Params)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measurement\tours\treference\tref value\tratio\tnote")
	for _, x := range r.Results {
		ref, ratio := "", ""
		if x.Ref > 0 {
			ref = fmt.Sprintf("%.1f %s", x.Ref, x.Unit)
			ratio = fmt.Sprintf("%.2f", x.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%.1f %s\t%s\t%s\t%s\t%s\n", x.Name, x.Ours, x.Unit, x.RefName, ref, ratio, x.Note)
	}
	tw.Flush()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }
