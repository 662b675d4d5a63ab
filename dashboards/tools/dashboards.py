"""nfsdtop's Grafana dashboards, as code (the source of grafana/*.json).

Edit here, then `python3 dashboards/tools/generate.py dashboards`; the e2e
test fails if the committed JSON and this file disagree. UIDs are stable:
links, bookmarks and provisioning rely on them.

Every panel queries raw nfsdtop_* series with $__rate_interval, so the
dashboards work without the recording rules loaded; the formulas are the
same as in rules/nfsdtop.rules.tmpl.yml.
"""

OVERVIEW_UID = "nfsdtop-overview"
DRILLDOWN_UID = "nfsdtop-drilldown"
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"

# Label selectors, filled by the template variables.
INST = 'job=~"$job", instance=~"$instance"'
CLS = INST + ', class=~"$class"'
PEER = CLS + ', peer=~"$peer"'
CLS_NAMED = CLS + ', class!="other"'  # the labelled classes, not the folded rest


def rate(metric, sel, by="class"):
    return f"sum by ({by}) (rate({metric}{{{sel}}}[{RI}]))"


def ratio(sel, prefix, by):
    """Fairness ratio: dispatches / entitled, for entities entitled to any."""
    return (
        f"{rate(f'nfsdtop_{prefix}_dispatches_total', sel, by)}\n"
        f"/\n({rate(f'nfsdtop_{prefix}_entitled_dispatches_total', sel, by)} > 0)"
    )


def share(num, sel, key="class", den=None):
    """Share of the whole server: sum by (instance, key) of num over the
    sum by (instance) of den (default: num itself) for all classes."""
    den = den or num
    return (
        f"{rate(num, sel, 'instance, ' + key)}\n/ ignoring ({key}) group_left ()\n"
        f"({rate(den, INST, 'instance')} > 0)"
    )


def fair_share(sel):
    """Entitled dispatches over all dispatches: the share it should have had."""
    return share("nfsdtop_class_entitled_dispatches_total", sel, den="nfsdtop_class_dispatches_total")


def jain(sel):
    r = ratio(sel + ', class!="other"', "class", "instance, class")
    return (
        f"sum by (instance) (\n{r}\n) ^ 2\n/\n(\n"
        f"  count by (instance) (\n{r}\n)\n  *\n  sum by (instance) ((\n{r}\n) ^ 2)\n)"
    )


def quantile(q, sel, by, metric="nfsdtop_class_queue_wait_seconds_bucket"):
    le = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({le}) (rate({metric}{{{sel}}}[{RI}])))"


def mean_per(num, den, sel, by):
    """Mean of num per den (thread seconds per request), for groups with any."""
    return f"{rate(num, sel, by)}\n/\n({rate(den, sel, by)} > 0)"


class Builder:
    """Lays panels out left to right, 24 columns wide, and numbers them."""

    def __init__(self):
        self.panels, self.next_id, self.x, self.y, self.row_h = [], 1, 0, 0, 0

    def row(self, title):
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def add(self, panel, w, h):
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _newline(self):
        if self.x:
            self.y += self.row_h
        self.x, self.row_h = 0, 0

    def _id(self):
        self.next_id += 1
        return self.next_id - 1


def target(expr, legend="", ref="A", instant=False, fmt=None):
    t = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto",
         "range": not instant, "instant": instant}
    if fmt:
        t["format"] = fmt
    return t


def panel(kind, title, desc, targets, unit=None, **extra):
    p = {"type": kind, "title": title, "description": desc, "datasource": DS,
         "targets": [t if isinstance(t, dict) else target(*t) for t in targets]}
    for i, t in enumerate(p["targets"]):
        t["refId"] = chr(ord("A") + i)
    defaults = {"custom": {}}
    if unit:
        defaults["unit"] = unit
    defaults.update(extra.pop("defaults", {}))
    p["fieldConfig"] = {"defaults": defaults, "overrides": extra.pop("overrides", [])}
    p["options"] = extra.pop("options", {})
    p.update(extra)
    return p


def timeseries(title, desc, targets, unit=None, stack=False, thresholds=None, minv=None, maxv=None,
               data_links=None, **kw):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 40 if stack else 10,
              "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    defaults = {"custom": custom}
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    if thresholds:
        custom["thresholdsStyle"] = {"mode": "dashed"}
        defaults["thresholds"] = thresholds
    if data_links:
        defaults["links"] = data_links
    return panel("timeseries", title, desc, targets, unit, defaults=defaults,
                 options={"legend": {"displayMode": "table", "placement": "right",
                                     "calcs": ["lastNotNull", "mean"], "showLegend": True},
                          "tooltip": {"mode": "multi", "sort": "desc"}}, **kw)


def dashed(regex):
    """Override: the series whose names match regex as unfilled dashed lines
    (a limit such as the thread count, drawn against the values)."""
    return {"matcher": {"id": "byRegexp", "options": regex},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                           {"id": "custom.fillOpacity", "value": 0}]}


def steps(*pairs):
    """Threshold steps: (None, colour), (value, colour), ..."""
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in pairs]}


def stat(title, desc, expr, unit=None, thr=None, legend="", decimals=None):
    defaults = {"thresholds": thr or steps((None, "blue"))}
    if decimals is not None:
        defaults["decimals"] = decimals
    return panel("stat", title, desc, [target(expr, legend)], unit, defaults=defaults,
                 options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                          "colorMode": "value", "graphMode": "area", "textMode": "auto",
                          "justifyMode": "auto", "orientation": "auto"})


def heatmap(title, desc, expr):
    return panel("heatmap", title, desc, [target(expr, "{{le}}", fmt="heatmap")], "s",
                 options={"calculate": False, "cellGap": 1,
                          "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential",
                                    "exponent": 0.5, "steps": 64},
                          "yAxis": {"axisPlacement": "left", "unit": "s"},
                          "rowsFrame": {"layout": "auto"},
                          "tooltip": {"show": True, "yHistogram": True},
                          "legend": {"show": True}, "filterValues": {"le": 1e-9}})


def var_datasource():
    return {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []}


def var_query(name, label, query, multi=False, include_all=False, all_value=None, hide=0):
    v = {"type": "query", "name": name, "label": label, "datasource": DS,
         "definition": query, "query": {"query": query, "refId": f"{name}-var"},
         "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all,
         "current": {}, "hide": hide, "regex": "", "options": []}
    if all_value is not None:
        v["allValue"] = all_value
    return v


def common_vars(class_multi):
    return [
        var_datasource(),
        var_query("job", "Job", "label_values(nfsdtop_build_info, job)"),
        var_query("instance", "nfsdtopd", 'label_values(nfsdtop_build_info{job=~"$job"}, instance)',
                  multi=True, include_all=True, all_value=".+"),
        var_query("class", "Class",
                  'label_values(nfsdtop_class_dispatches_total{job=~"$job", instance=~"$instance"}, class)',
                  multi=class_multi, include_all=class_multi, all_value=".+" if class_multi else None),
    ]


def dashboard(uid, title, desc, panels, variables, links):
    return {
        "uid": uid, "title": title, "description": desc,
        "tags": ["nfsdtop", "nfs", "sunrpc"], "timezone": "browser", "editable": True,
        "graphTooltip": 1, "refresh": "30s", "schemaVersion": 39, "version": 1,
        "time": {"from": "now-1h", "to": "now"}, "timepicker": {},
        "fiscalYearStartMonth": 0, "liveNow": False, "weekStart": "",
        "annotations": {"list": [
            {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
             "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
             "type": "dashboard"},
            {"datasource": DS, "enable": True, "iconColor": "red", "name": "nfsdtop alerts",
             "expr": 'ALERTS{alertname=~"Nfsdtop.*", alertstate="firing", job=~"$job"}',
             "step": "60s", "titleFormat": "{{alertname}}", "textFormat": "{{class}} {{instance}}",
             "useValueForTime": False}]},
        "links": links,
        "templating": {"list": variables},
        "panels": panels,
    }


RATIO_THRESHOLDS = steps((None, "red"), (0.5, "orange"), (0.9, "green"))
# Busy threads over threads: near 1 every nfsd thread is in service and
# requests wait on the ready queue for one.
SATURATION_THRESHOLDS = steps((None, "green"), (0.75, "orange"), (0.9, "red"))


def busy_threads(sel, by="instance"):
    """Mean nfsd threads executing requests over the window; by pool too
    when `by` names it."""
    pool = "_pool" if "pool" in by else ""
    return rate(f"nfsdtop_server{pool}_busy_thread_seconds_total", sel, by)


def saturation(sel):
    """Busy threads / threads, per nfsdtopd (0..1)."""
    return (f"{busy_threads(sel)}\n/\n"
            f"(sum by (instance) (nfsdtop_server_threads{{{sel}}}) > 0)")
# Red from NfsdtopQueueWaitHigh's default (a histogram bucket boundary).
WAIT_THRESHOLDS = steps((None, "green"), (0.131072, "orange"), (0.524288, "red"))


def overview():
    b = Builder()
    b.row("Summary")
    b.add(stat("Dispatches/s", "svc_xprt_dequeue events per second, all classes.",
               f"sum(rate(nfsdtop_dispatches_total{{{INST}}}[{RI}]))", "reqps"), 4, 4)
    b.add(stat("Jain's index", "Jain's fairness index over the fairness ratios of the classes "
               "backlogged in the interval: 1 = every backlogged class got its fair turn, "
               "1/n = one class got all of them. class=\"other\" (folded) is left out.",
               jain(INST), "none", RATIO_THRESHOLDS, legend="{{instance}}", decimals=3), 4, 4)
    b.add(stat("Backlogged classes", "Classes with a transport on the ready queue now.",
               f'sum(nfsdtop_class_backlogged{{{INST}, class!="other"}})', "none"), 4, 4)
    b.add(stat("Queue wait p99", "99th percentile of ready -> dispatched, all classes.",
               quantile(0.99, INST, ""), "s",
               WAIT_THRESHOLDS), 4, 4)
    b.add(stat("Events lost", "Events dropped (ring buffer full) in the dashboard's time range. "
               "Anything but 0 means every number here undercounts.",
               f"sum(increase(nfsdtop_events_lost_total{{{INST}}}[$__range]))", "none",
               steps((None, "green"), (1, "red"))), 4, 4)
    b.add(panel("table", "Source", "Where nfsdtopd's events come from, and how it measures queue wait.",
                [target(f"nfsdtop_source_info{{{INST}}}", instant=True, fmt="table")],
                options={"showHeader": True, "cellHeight": "sm"},
                transformations=[{"id": "organize", "options": {
                    "excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True},
                    "renameByName": {"wait_source": "wait source"}}}]), 4, 4)

    b.row("Who gets the threads")
    b.add(timeseries("Share of dispatches per class",
                     "Each class's share of all dispatches (stacked to 100%). Under today's flat "
                     "queue a class's share follows its connection count; see the fairness ratio.",
                     [(share("nfsdtop_class_dispatches_total", CLS),
                       "{{class}}")], "percentunit", stack=True, minv=0, maxv=1), 12, 9)
    b.add(timeseries("Fairness ratio per class",
                     "Dispatches / fair-share entitlement while backlogged. 1 = its fair turn, "
                     "< 1 = less (0.5 = half), > 1 = more. Only backlogged classes have one.",
                     [(ratio(CLS, "class", "instance, class"), "{{class}}")], "none",
                     thresholds=RATIO_THRESHOLDS, minv=0,
                     data_links=[{"title": "Drill down into ${__field.labels.class}",
                             "url": f"/d/{DRILLDOWN_UID}/nfsdtop-class-and-peers?${{__url_time_range}}"
                                    "&var-datasource=${datasource}&var-job=${job}"
                                    "&var-class=${__field.labels.class}"}]), 12, 9)
    b.add(timeseries("Dispatch rate per class", "Dispatches per second per class.",
                     [(rate("nfsdtop_class_dispatches_total", CLS, "instance, class"), "{{class}}")],
                     "reqps", minv=0), 8, 8)
    b.add(timeseries("Jain's index", "Over the backlogged classes' fairness ratios.",
                     [(jain(INST), "{{instance}}")], "none", thresholds=RATIO_THRESHOLDS,
                     minv=0, maxv=1), 8, 8)
    b.add(timeseries("Execution (thread-time) share per class",
                     "Share of nfsd thread time. Round-robin equalises dispatches, not thread "
                     "time: a class with long requests holds threads longer.",
                     [(share("nfsdtop_class_execution_seconds_total", CLS),
                       "{{class}}")], "percentunit", stack=True, minv=0, maxv=1), 8, 8)
    b.add(panel("table", "Classes now",
                "Per class over the last 5 minutes: share, fair share (entitlement / all "
                "dispatches), fairness ratio, time backlogged, thread-time share, connections.",
                [target(share("nfsdtop_class_dispatches_total", CLS)
                        .replace(RI, "5m"), instant=True, fmt="table"),
                 target(fair_share(CLS).replace(RI, "5m"),
                        instant=True, fmt="table"),
                 target(ratio(CLS, "class", "instance, class").replace(RI, "5m"), instant=True, fmt="table"),
                 target(rate("nfsdtop_class_backlogged_seconds_total", CLS, "instance, class").replace(RI, "5m"),
                        instant=True, fmt="table"),
                 target(share("nfsdtop_class_execution_seconds_total", CLS)
                        .replace(RI, "5m"), instant=True, fmt="table"),
                 target(f"sum by (instance, class) (nfsdtop_class_connections{{{CLS}}})", instant=True, fmt="table")],
                options={"showHeader": True, "cellHeight": "sm",
                         "sortBy": [{"displayName": "fairness", "desc": False}]},
                defaults={"custom": {"align": "auto"}},
                overrides=[
                    {"matcher": {"id": "byRegexp", "options": "share|fair share|backlogged|thread time"},
                     "properties": [{"id": "unit", "value": "percentunit"}, {"id": "decimals", "value": 1}]},
                    {"matcher": {"id": "byName", "options": "fairness"},
                     "properties": [{"id": "decimals", "value": 2}, {"id": "thresholds", "value": RATIO_THRESHOLDS},
                                    {"id": "custom.cellOptions", "value": {"type": "color-background"}}]},
                    {"matcher": {"id": "byName", "options": "class"},
                     "properties": [{"id": "links", "value": [{
                         "title": "Drill down into ${__value.raw}",
                         "url": f"/d/{DRILLDOWN_UID}/nfsdtop-class-and-peers?${{__url_time_range}}"
                                "&var-datasource=${datasource}&var-job=${job}&var-class=${__value.raw}"}]}]}],
                transformations=[
                    {"id": "merge", "options": {}},
                    {"id": "organize", "options": {
                        "excludeByName": {"Time": True},
                        "renameByName": {"Value #A": "share", "Value #B": "fair share", "Value #C": "fairness",
                                         "Value #D": "backlogged", "Value #E": "thread time",
                                         "Value #F": "connections"}}}]), 24, 9)

    b.row("Who waits")
    b.add(timeseries("Backlogged fraction per class",
                     "Fraction of time the class had work queued (1 = always waiting for a thread).",
                     [(rate("nfsdtop_class_backlogged_seconds_total", CLS, "instance, class"), "{{class}}")],
                     "percentunit", minv=0, maxv=1), 8, 8)
    b.add(timeseries("Backlogged classes", "Classes with work queued, sampled at each scrape.",
                     [(f'sum by (instance) (nfsdtop_class_backlogged{{{INST}, class!="other"}})', "{{instance}}")],
                     "none", minv=0), 8, 8)
    b.add(timeseries("Connections per class", "Transports (connections) per class now. Under the "
                     "flat queue a backlogged class's share follows its connection count.",
                     [(f"sum by (instance, class) (nfsdtop_class_connections{{{CLS}}})", "{{class}}")],
                     "none", minv=0), 8, 8)
    b.add(heatmap("Queue wait (selected classes)",
                  "Distribution of ready -> dispatched times (per interval).",
                  f"sum by (le) (increase(nfsdtop_class_queue_wait_seconds_bucket{{{CLS}}}[{RI}]))"), 12, 9)
    b.add(timeseries("Queue wait p99 per class", "99th percentile of ready -> dispatched, per class; "
                     "dashed: p50.",
                     [(quantile(0.99, CLS, "instance, class"), "p99 {{class}}"),
                      (quantile(0.5, CLS, "instance, class"), "p50 {{class}}")], "s", minv=0,
                     overrides=[{"matcher": {"id": "byRegexp", "options": "p50 .*"},
                                 "properties": [{"id": "custom.lineStyle",
                                                 "value": {"fill": "dash", "dash": [10, 10]}}]}]), 12, 9)

    b.row("Server threads")
    b.add(stat("Thread saturation",
               "Busy nfsd threads / nfsd threads over the interval, per nfsdtopd. Near 100% "
               "every thread is executing a request: new requests wait on the ready queue, "
               "and only then does the dispatch order (who gets the next free thread) matter. "
               "Orange from 75%, red from 90%. Empty where nfsdtopd does not know the thread "
               "count or sees no execution events (svc_stats_latency).",
               saturation(INST), "percentunit", SATURATION_THRESHOLDS, legend="{{instance}}",
               decimals=1), 4, 8)
    b.add(timeseries("Busy threads / threads",
                     "Mean nfsd threads executing requests (rate of "
                     "nfsdtop_server_busy_thread_seconds_total) against the threads nfsd runs "
                     "(dashed, /proc/fs/nfsd/threads). When busy meets the dashed line the "
                     "server is saturated: requests queue, and the backlogged fractions and "
                     "queue waits above grow.",
                     [(busy_threads(INST), "busy {{instance}}"),
                      (f"sum by (instance) (nfsdtop_server_threads{{{INST}}})", "threads {{instance}}")],
                     "none", minv=0,
                     overrides=[dashed("threads .*")]), 8, 8)
    b.add(timeseries("Busy threads per pool",
                     "Mean busy threads of each nfsd thread pool, against its threads (dashed, "
                     "/proc/fs/nfsd/pool_threads). With sunrpc pool_mode=global (the default) "
                     "there is one pool, 0, and it is the whole server: the same lines as on "
                     "the left. With pernode/percpu pools each pool serves its own CPUs' "
                     "requests, so one pool can be saturated while the server as a whole is "
                     "not (the sum of the pools is the server). A pool's busy threads are "
                     "missing where not measured per pool (several pools in a replay or the "
                     "demo; an interval in which over 1% of the execution time had no pool); "
                     "its threads are still shown.",
                     [(busy_threads(INST, "instance, pool"), "busy pool {{pool}}"),
                      (f"sum by (instance, pool) (nfsdtop_server_pool_threads{{{INST}}})",
                       "threads pool {{pool}}")],
                     "none", minv=0,
                     overrides=[dashed("threads .*")]), 8, 8)
    b.add(stat("Network namespaces",
               "Network namespaces with NFS traffic: those of the peers nfsdtopd tracks now. "
               "More than 1: nfsd serves several containers, which share these threads.",
               f"sum by (instance) (nfsdtop_server_network_namespaces{{{INST}}})", "none",
               legend="{{instance}}"), 4, 8)
    b.add(timeseries("Other RPC services",
                     "Dispatches per second of the RPC services that are not nfsd, by server "
                     "port: lockd, and the NFS client's callback service where the server is "
                     "also a client. They fire the same tracepoints but run on threads and a "
                     "queue of their own, so nfsdtop counts them here and in no other panel. "
                     "Empty where there are none (NFSv4 only, or clients mounting with nolock).",
                     [(rate("nfsdtop_service_dispatches_total", INST + ', service!="nfsd"',
                            "instance, service, port"), "{{service}} port {{port}} {{instance}}")],
                     "reqps", minv=0), 8, 8)
    b.add(timeseries("Other RPC services: fairness by peer",
                     "Each peer's dispatches over its fair share among the peers of its own "
                     "service (lockd, the NFS callback service, or another port): 1 is fair, "
                     "below 1 it got less than its turn of that service's threads. The 32 "
                     "busiest peers of each service. Empty where there are no other services.",
                     [(f'{rate("nfsdtop_service_peer_dispatches_total", INST, "instance, service, port, peer")}'
                       f' / ({rate("nfsdtop_service_peer_entitled_dispatches_total", INST, "instance, service, port, peer")} > 0)',
                       "{{service}} {{peer}} {{instance}}")],
                     "none", minv=0), 8, 8)

    b.row("What clients do")
    b.add(timeseries("Top classes by operations",
                     "Requests nfsd executed per second (svc_stats_latency), the 10 busiest "
                     "classes; class=\"other\" (folded) is left out.",
                     [(f'topk(10, {rate("nfsdtop_class_requests_total", CLS_NAMED, "instance, class")})',
                       "{{class}}")], "reqps", minv=0), 8, 8)
    b.add(timeseries("Top classes by data read",
                     "RPC bytes nfsd sent per second (rq_res.len: replies, READ data "
                     "included), the 10 busiest classes. Empty where nfsdtopd runs on classic "
                     "tracepoints (no lengths there).",
                     [(f'topk(10, {rate("nfsdtop_class_sent_bytes_total", CLS_NAMED, "instance, class")})',
                       "{{class}}")], "Bps", minv=0), 8, 8)
    b.add(timeseries("Top classes by data written",
                     "RPC bytes nfsd received per second (rq_arg.len: requests, WRITE data "
                     "included), the 10 busiest classes. Empty on classic tracepoints.",
                     [(f'topk(10, {rate("nfsdtop_class_received_bytes_total", CLS_NAMED, "instance, class")})',
                       "{{class}}")], "Bps", minv=0), 8, 8)
    b.add(timeseries("Requests per procedure",
                     "Requests nfsd executed per second by RPC procedure (the kernel's name: READ, "
                     "WRITE, GETATTR, ...; NFSv4 shows COMPOUND), summed over the selected classes, "
                     "the 10 busiest procedures. Counted for labelled classes only (not "
                     "class=\"other\"), from when a class got its label.",
                     [(f'topk(10, {rate("nfsdtop_class_procedure_requests_total", CLS, "instance, procedure")})',
                       "{{procedure}}")], "reqps", minv=0), 12, 8)
    b.add(timeseries("Mean execution time per procedure",
                     "nfsd thread time per request of each procedure over the selected classes "
                     "(rate of execution seconds / rate of requests): how long a thread is held "
                     "once the request is dispatched, queue wait not included. A procedure "
                     "slower than usual points at the storage or the file system behind it.",
                     [(mean_per("nfsdtop_class_procedure_execution_seconds_total",
                                "nfsdtop_class_procedure_requests_total", CLS, "instance, procedure"),
                       "{{procedure}}")], "s", minv=0), 12, 8)

    b.row("nfsdtopd itself")
    b.add(timeseries("Events lost per second", "Ring-buffer overflows by tracepoint. Should be 0.",
                     [(rate("nfsdtop_events_lost_total", INST, "instance, tracepoint"), "{{tracepoint}}")],
                     "cps", minv=0), 5, 7)
    b.add(timeseries("Events per second", "Events seen by tracepoint.",
                     [(rate("nfsdtop_events_total", INST, "instance, tracepoint"), "{{tracepoint}}")],
                     "cps", minv=0), 5, 7)
    b.add(timeseries("BPF CPU time", "CPU seconds per second spent in nfsdtop's BPF programs "
                     "(needs nfsdtopd --bpf-stats or kernel.bpf_stats_enabled=1; empty otherwise).",
                     [(rate("nfsdtop_bpf_run_seconds_total", INST, "instance, program"), "{{program}}")],
                     "percentunit", minv=0), 5, 7)
    b.add(timeseries("Tracked entities", "Peers, classes and transports nfsdtopd tracks; peers "
                     "folded into peer=\"other\" and evictions.",
                     [(f"sum by (instance) (nfsdtop_peers{{{INST}}})", "peers"),
                      (f"sum by (instance) (nfsdtop_classes{{{INST}}})", "classes"),
                      (f"sum by (instance) (nfsdtop_transports{{{INST}}})", "transports"),
                      (f"sum by (instance) (nfsdtop_peers_folded{{{INST}}})", "peers folded"),
                      (f"sum by (instance) (increase(nfsdtop_peers_evicted_total{{{INST}}}[{RI}]))",
                       "peers evicted")], "none", minv=0), 5, 7)
    b.add(timeseries("Snapshot age", "Seconds since nfsdtopd's last snapshot, at each scrape. "
                     "It should stay around the snapshot interval (1 s by default): a growing "
                     "age with the target up means the pipeline is stuck while /metrics still answers.",
                     [(f"time() - max by (instance) (nfsdtop_last_snapshot_timestamp_seconds{{{INST}}})",
                       "{{instance}}")], "s", minv=0), 4, 7)
    b.add(timeseries("Below their fair share", "Peers and classes backlogged and below "
                     "nfsdtopd's --unfair-ratio (default 0.5) of their fair share over about the "
                     "last minute, and how many of them have no series of their own (folded "
                     "beyond the top K). The list: curl http://NFSDTOPD:9847/api/v1/unfair.",
                     [(f"sum by (instance, kind) (nfsdtop_unfair_entities{{{INST}}})",
                       "{{kind}} below"),
                      (f"sum by (instance, kind) (nfsdtop_unfair_entities_folded{{{INST}}})",
                       "{{kind}} below, folded")], "none", minv=0), 24, 6)
    return dashboard(
        OVERVIEW_UID, "nfsdtop / NFS dispatch fairness",
        "How a Linux NFS server's RPC dispatch is shared among clients (nfsdtopd metrics). "
        "Without a class map every client address is its own class.",
        b.panels, common_vars(class_multi=True),
        [{"title": "Class and peers", "type": "link", "icon": "dashboard", "keepTime": True,
          "includeVars": True, "url": f"/d/{DRILLDOWN_UID}/nfsdtop-class-and-peers"},
         {"title": "Runbooks", "type": "link", "icon": "doc", "targetBlank": True,
          "url": "file:///usr/share/nfsdtop/runbooks/RUNBOOKS.md"}])


def drilldown():
    b = Builder()
    one = CLS  # class is single-valued here
    b.row("Class $class")
    b.add(stat("Share", "Share of all dispatches.",
               share("nfsdtop_class_dispatches_total", one),
               "percentunit", decimals=1), 6, 4)
    b.add(stat("Fair share", "Entitlement / all dispatches: the share it should have had.",
               fair_share(one),
               "percentunit", decimals=1), 6, 4)
    b.add(stat("Fairness ratio", "Dispatches / entitled. < 1: less than its fair turn.",
               ratio(one, "class", "instance, class"), "none", RATIO_THRESHOLDS, decimals=2), 6, 4)
    b.add(stat("Queue wait p99", "99th percentile of ready -> dispatched for this class.",
               quantile(0.99, one, "instance, class"), "s",
               WAIT_THRESHOLDS), 6, 4)
    b.add(timeseries("Share vs fair share", "Its share of dispatches against the share it was "
                     "entitled to while backlogged.",
                     [(share("nfsdtop_class_dispatches_total", one),
                       "share {{class}}"),
                      (fair_share(one),
                       "fair share {{class}}")], "percentunit", minv=0, maxv=1), 12, 8)
    b.add(heatmap("Queue wait", "Distribution of ready -> dispatched times for this class.",
                  f"sum by (le) (increase(nfsdtop_class_queue_wait_seconds_bucket{{{one}}}[{RI}]))"), 12, 8)

    b.add(timeseries("Threads: $class and the server",
                     "nfsd threads this class's requests kept busy (its thread seconds per "
                     "second) against all busy threads and the threads nfsd runs (dashed). "
                     "Only when the server's busy threads reach its threads do requests queue: "
                     "then a class below its fair share waits for threads the others hold.",
                     [(rate("nfsdtop_class_execution_seconds_total", one, "instance, class"),
                       "{{class}}"),
                      (busy_threads(INST), "busy, all classes {{instance}}"),
                      (f"sum by (instance) (nfsdtop_server_threads{{{INST}}})", "threads {{instance}}")],
                     "none", minv=0,
                     overrides=[dashed("threads .*")]), 24, 7)

    b.row("Peers of $class (top K; peer=\"other\" is the rest)")
    b.add(timeseries("Dispatch rate per peer", "Dispatches per second.",
                     [(rate("nfsdtop_peer_dispatches_total", PEER, "instance, peer"), "{{peer}}")],
                     "reqps", stack=True, minv=0), 12, 8)
    b.add(timeseries("Fairness ratio per peer", "Per-peer dispatches / entitlement (peers compete "
                     "as entities of their own here, whatever the class map says).",
                     [(ratio(PEER, "peer", "instance, peer"), "{{peer}}")], "none",
                     thresholds=RATIO_THRESHOLDS, minv=0), 12, 8)
    b.add(timeseries("Backlogged fraction per peer", "Fraction of time the peer had work queued.",
                     [(rate("nfsdtop_peer_backlogged_seconds_total", PEER, "instance, peer"), "{{peer}}")],
                     "percentunit", minv=0, maxv=1), 8, 8)
    b.add(timeseries("Thread time per peer", "nfsd thread seconds per second (threads busy).",
                     [(rate("nfsdtop_peer_execution_seconds_total", PEER, "instance, peer"), "{{peer}}")],
                     "none", stack=True, minv=0), 8, 8)
    b.add(timeseries("Operations per peer", "Requests nfsd executed per second for each peer.",
                     [(rate("nfsdtop_peer_requests_total", PEER, "instance, peer"), "{{peer}}")],
                     "reqps", stack=True, minv=0), 12, 8)
    b.add(timeseries("Bytes per peer", "RPC bytes per second: sent (reads) above the axis, "
                     "received (writes) below. Empty on classic tracepoints.",
                     [(rate("nfsdtop_peer_sent_bytes_total", PEER, "instance, peer"), "sent {{peer}}"),
                      (f'-{rate("nfsdtop_peer_received_bytes_total", PEER, "instance, peer")}',
                       "received {{peer}}")], "Bps"), 12, 8)
    b.add(timeseries("Connections per peer", "Transports per peer now.",
                     [(f"sum by (instance, peer) (nfsdtop_peer_connections{{{PEER}}})", "{{peer}}")],
                     "none", minv=0), 8, 8)
    b.add(timeseries("Peers folded into \"other\"", "Peers beyond the top K, summed into peer=\"other\".",
                     [(f"sum by (instance) (nfsdtop_peers_folded{{{INST}}})", "{{instance}}")],
                     "none", minv=0), 24, 5)

    b.row("Procedures of $peer (labelled peers only: none for peer=\"other\")")
    b.add(timeseries("Requests per peer and procedure",
                     "Requests nfsd executed per second for each chosen peer by RPC procedure "
                     "(the kernel's name: READ, WRITE, GETATTR, ...), stacked. Choose one peer "
                     "to see its own mix.",
                     [(rate("nfsdtop_peer_procedure_requests_total", PEER, "instance, peer, procedure"),
                       "{{peer}} {{procedure}}")], "reqps", stack=True, minv=0), 12, 8)
    b.add(timeseries("Mean execution time per peer and procedure",
                     "nfsd thread time per request of each chosen peer's procedures (rate of "
                     "execution seconds / rate of requests), queue wait not included. Compare "
                     "with the same procedure on the overview: slower for one peer only points "
                     "at what it works on (large I/O, a slow export), not at the server.",
                     [(mean_per("nfsdtop_peer_procedure_execution_seconds_total",
                                "nfsdtop_peer_procedure_requests_total", PEER, "instance, peer, procedure"),
                       "{{peer}} {{procedure}}")], "s", minv=0), 12, 8)
    b.add(timeseries("NFSv4 operations per peer",
                     "NFSv4 operations per second inside each chosen peer's COMPOUNDs "
                     "(SEQUENCE, PUTFH, READ, WRITE, GETATTR...: what an NFSv4 client's "
                     "requests are made of), stacked; the 10 busiest. Only with nfsdtopd's "
                     "nfs4_ops = true (--nfs4-ops: it costs, see BENCHMARKS.md) and NFSv4 "
                     "clients; empty otherwise.",
                     [(f'topk(10, {rate("nfsdtop_peer_nfs4_operations_total", PEER, "instance, peer, operation")})',
                       "{{peer}} {{operation}}")], "ops", stack=True, minv=0), 24, 8)
    variables = common_vars(class_multi=False) + [
        var_query("peer", "Peer",
                  'label_values(nfsdtop_peer_dispatches_total{job=~"$job", instance=~"$instance", class=~"$class"}, peer)',
                  multi=True, include_all=True, all_value=".+")]
    return dashboard(
        DRILLDOWN_UID, "nfsdtop / class and peers",
        "One class (one client without a class map) and the peers in it.",
        b.panels, variables,
        [{"title": "Overview", "type": "link", "icon": "dashboard", "keepTime": True,
          "includeVars": True, "url": f"/d/{OVERVIEW_UID}/nfsdtop-nfs-dispatch-fairness"}])


def all_dashboards():
    return {"nfsdtop-overview.json": overview(), "nfsdtop-drilldown.json": drilldown()}
