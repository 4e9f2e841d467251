package mapred

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
)

// WebHandler serves a read-only view of the jobs whose status is in
// logDir: "/" lists them, "/job/ID" shows one (its status, progress and,
// once it has ended, its report), and "/jobs.json" and "/job/ID.json"
// give the same as JSON. Everything comes from the status and report
// files the coordinators keep in PlasmaFS, so the view needs no
// connection to the coordinators and shows jobs of every host.
func WebHandler(c *client.Client, logDir string) http.Handler {
	w := &web{c: c, log: logDir}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", w.list)
	mux.HandleFunc("GET /jobs.json", w.listJSON)
	mux.HandleFunc("GET /job/{id}", w.job)
	return mux
}

type web struct {
	c   *client.Client
	log string
}

const webTimeout = 10 * time.Second

var listPage = template.Must(template.New("list").Funcs(webFuncs).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Plasma MapReduce jobs</title>
<meta http-equiv="refresh" content="5">
<style>body{font-family:sans-serif} td,th{padding:2px 10px;text-align:left} .bar{background:#ddd;width:120px;display:inline-block} .bar span{background:#4a4;display:inline-block;height:10px}</style></head>
<body><h1>MapReduce jobs in {{.Log}}</h1>
<table><tr><th>job</th><th>state</th><th>phase</th><th>maps</th><th>reduces</th><th>started</th><th>name</th></tr>
{{range .Jobs}}<tr><td><a href="job/{{.JobID}}">{{.JobID}}</a></td><td>{{.State}}</td><td>{{.Phase}}</td>
<td>{{bar .MapsDone .MapTasks}} {{.MapsDone}}/{{.MapTasks}}</td><td>{{bar .ReducesDone .ReduceTasks}} {{.ReducesDone}}/{{.ReduceTasks}}</td>
<td>{{.Started.UTC.Format "2006-01-02 15:04:05"}}</td><td>{{.Name}}</td></tr>
{{else}}<tr><td colspan="7">no jobs</td></tr>{{end}}</table></body></html>
`))

var jobPage = template.Must(template.New("job").Funcs(webFuncs).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>job {{.S.JobID}}</title>
{{if eq .S.State "running"}}<meta http-equiv="refresh" content="2">{{end}}
<style>body{font-family:sans-serif} .bar{background:#ddd;width:240px;display:inline-block} .bar span{background:#4a4;display:inline-block;height:10px}</style></head>
<body><p><a href="../">all jobs</a></p><h1>job {{.S.JobID}} ({{.S.Name}}): {{.S.State}}</h1>
<p>phase {{.S.Phase}}</p>
<p>map tasks {{bar .S.MapsDone .S.MapTasks}} {{.S.MapsDone}}/{{.S.MapTasks}}<br>
reduce tasks {{bar .S.ReducesDone .S.ReduceTasks}} {{.S.ReducesDone}}/{{.S.ReduceTasks}}<br>
failed attempts {{.S.FailedAttempts}}</p>
{{if .S.Error}}<p><b>error:</b> {{.S.Error}}</p>{{end}}
<pre>{{.S.Text}}</pre>
{{if .Report}}<h2>report</h2><pre>{{.Report}}</pre>{{end}}
</body></html>
`))

var webFuncs = template.FuncMap{
	"bar": func(done, total int) template.HTML {
		pct := 0
		if total > 0 {
			pct = 100 * done / total
		}
		return template.HTML(fmt.Sprintf(`<span class="bar"><span style="width:%d%%"></span></span>`, pct))
	},
}

func (w *web) list(rw http.ResponseWriter, r *http.Request) {
	if jobs, ok := w.jobs(rw, r); ok {
		render(rw, listPage, struct {
			Log  string
			Jobs []*Status
		}{w.log, jobs})
	}
}

func (w *web) listJSON(rw http.ResponseWriter, r *http.Request) {
	if jobs, ok := w.jobs(rw, r); ok {
		writeJSON(rw, jobs)
	}
}

// jobs lists the jobs, or answers the error and reports !ok.
func (w *web) jobs(rw http.ResponseWriter, r *http.Request) ([]*Status, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), webTimeout)
	defer cancel()
	jobs, err := ListJobs(ctx, w.c, w.log)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return nil, false
	}
	return jobs, true
}

func (w *web) job(rw http.ResponseWriter, r *http.Request) {
	id, asJSON := strings.CutSuffix(r.PathValue("id"), ".json")
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		http.NotFound(rw, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), webTimeout)
	defer cancel()
	s, err := ReadStatus(ctx, w.c, w.log, id)
	if err != nil {
		http.Error(rw, fmt.Sprintf("job %s: %v", id, err), http.StatusNotFound)
		return
	}
	report := w.report(ctx, id)
	if asJSON {
		writeJSON(rw, struct {
			*Status
			Report string `json:"report,omitempty"`
		}{s, report})
		return
	}
	render(rw, jobPage, struct {
		S      *Status
		Report string
	}{s, report})
}

// report is the text of LOG/ID/report, "" while the job runs.
func (w *web) report(ctx context.Context, id string) string {
	tx := w.c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, w.log+"/"+id+"/report")
	if err != nil {
		return ""
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return ""
	}
	return b.String()
}

func render(rw http.ResponseWriter, t *template.Template, data any) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Write(b.Bytes())
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(rw)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
