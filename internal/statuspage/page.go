package statuspage

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="5">
<link rel="icon" href="data:,">
<title>PlasmaFS {{.Status.Cluster}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:.5rem 1rem;color:#222;background:#fafafa}
h1{font-size:1.4rem;margin:.5rem 0}h2{font-size:1.1rem;margin:1.2rem 0 .4rem}
.state{display:inline-block;padding:.2rem .6rem;border-radius:.3rem;color:#fff;background:#b3261e}.state.ok{background:#2e7d32}
.grid{display:flex;flex-wrap:wrap;gap:.6rem}.card{background:#fff;border:1px solid #ddd;border-radius:.4rem;padding:.5rem .7rem;flex:1 1 12rem}
.num{font-size:1.3rem;font-weight:600}
table{border-collapse:collapse;width:100%;background:#fff}td,th{border-bottom:1px solid #eee;padding:.3rem .4rem;text-align:left;font-size:.9rem}
.bar{background:#e0e0e0;border-radius:.2rem;height:.7rem;min-width:5rem}.bar div{background:#1565c0;height:100%;border-radius:.2rem}
.live{color:#2e7d32;font-weight:600}.dead{color:#b3261e;font-weight:600}
svg{width:100%;height:5rem;background:#fff;border:1px solid #ddd;border-radius:.3rem}polyline{fill:none;stroke:#1565c0;stroke-width:1.5}
.err td{font-family:ui-monospace,monospace;font-size:.8rem;word-break:break-word}.err td:nth-child(-n+2){white-space:nowrap}
@media (max-width:40rem){.hide-narrow{display:none}}
</style>
</head>
<body>
<h1>PlasmaFS cluster {{.Status.Cluster}}</h1>
<p><span id="state" class="state{{if .StateOK}} ok{{end}}">{{.State}}</span> <small>as of {{.Status.Time.Format "2006-01-02 15:04:05 MST"}}</small></p>
<div class="grid">
<div class="card">datanodes<div class="num">{{.Live}} live, {{.Dead}} dead</div></div>
<div class="card">space used<div class="num">{{.UsedHuman}} of {{.CapHuman}}</div><div class="bar"><div style="width:{{.UsedPct}}%"></div></div></div>
<div class="card">open transactions<div class="num" id="txns">{{.Status.OpenTxns}}</div>locks {{.Status.Locks}}, leases {{.Status.Leases}}</div>
<div class="card">under-replicated blocks<div class="num" id="under-replicated">{{.Under}}</div>lost <span id="lost">{{.Health.Lost}}</span>, waiting for dead datanodes {{.Health.Waiting}}, queued for copy <span id="queued">{{.Health.Queued}}</span>; damaged replicas <span id="damaged">{{.Health.Damaged}}</span>; {{.Counted}}</div>
<div class="card">commits<div class="num">{{.Status.Commits}}</div>in {{.Status.Batches}} batches; {{.Status.Requests}} requests</div>
</div>
<h2>Datanodes</h2>
<table id="datanodes">
<tr><th>id</th><th>address</th><th>state</th><th>used</th><th class="hide-narrow">heartbeat</th></tr>
{{range .Datanodes}}<tr class="datanode" data-identity="{{.Identity}}">
<td>{{.ID}}</td>
<td>{{if .AdminURL}}<a href="{{.AdminURL}}">{{.Addr}}</a>{{else}}{{.Addr}}{{end}}<br><small class="hide-narrow">{{.Identity}}</small></td>
<td class="{{if .Alive}}live{{else}}dead{{end}}">{{if .Alive}}live{{else}}dead{{end}}{{if not .Enabled}} (disabled){{end}}</td>
<td><div class="bar" title="{{.UsedPct}}%"><div style="width:{{.UsedPct}}%"></div></div><small>{{.UsedHuman}} of {{.CapHuman}}</small></td>
<td class="hide-narrow">{{.Seen}}</td>
</tr>{{end}}
</table>
<h2>Commits, last minutes</h2>
<div class="grid">
<div class="card">rate ({{.Rate.Unit}}){{if .Rate.Empty}}<p>collecting…</p>{{else}} now {{.Rate.Last}}, peak {{.Rate.Max}}
<svg viewBox="0 0 300 80" preserveAspectRatio="none" role="img" aria-label="commit rate"><polyline points="{{.Rate.Points}}"/></svg>{{end}}</div>
<div class="card">mean latency ({{.Latency.Unit}}){{if .Latency.Empty}}<p>collecting…</p>{{else}} now {{.Latency.Last}}, peak {{.Latency.Max}}
<svg viewBox="0 0 300 80" preserveAspectRatio="none" role="img" aria-label="commit latency"><polyline points="{{.Latency.Points}}"/></svg>{{end}}</div>
</div>
<h2>Recent warnings and errors</h2>
{{if .Errors}}<table class="err">{{range .Errors}}<tr><td>{{.Time.Format "15:04:05"}}</td><td>{{.Level}}</td><td>{{.Message}} {{.Attrs}}</td></tr>{{end}}</table>
{{else}}<p>none</p>{{end}}
<p><small><a href="/metrics">metrics</a> (Prometheus)</small></p>
</body>
</html>
`
