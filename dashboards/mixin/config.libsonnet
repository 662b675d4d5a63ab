// nfsdtop mixin: every knob of the rules and dashboards (_config), with
// its default. Why each default is what it is: ../rules/thresholds.md.
// Override in jsonnet, `(import 'mixin.libsonnet') + { _config+:: {...} }`,
// or with generate.py's --set NAME=VALUE / --profile NAME (profiles/).
{
  _config+:: {
    // --- Where the metrics come from -------------------------------------
    // Selects nfsdtopd's series in every rule; NfsdtopAgentDown watches
    // up{<this>}.
    nfsdtopSelector: 'job="nfsdtop"',
    // Window of every rate() in the rules; recording rule names carry it
    // (class:nfsdtop_fairness:ratio_rate5m). At least 4 scrape intervals.
    rateWindow: '5m',
    // Evaluation interval of the rule groups; null: Prometheus's global one.
    ruleInterval: null,
    // The Prometheus the "fires after" figures are computed for (the
    // example ../prometheus/prometheus.yml: 15s both). The rules do not
    // depend on them; set them to yours to read your own figures.
    scrapeInterval: '15s',
    evaluationInterval: '15s',
    // Base of the runbook links; each alert appends #its-section. The
    // default is where the .deb and `cargo xtask install --prefix /usr`
    // put the runbooks (`--runbook-base URL` renders URL/RUNBOOKS.md).
    runbookBaseUrl: 'file:///usr/share/nfsdtop/runbooks/RUNBOOKS.md',

    // --- NfsdtopUnfairShare ----------------------------------------------
    // Below unfairRatio of its entitled dispatches, while backlogged at
    // least unfairBacklogged of the time and entitled to at least
    // unfairMinEntitledRate dispatches/s, for unfairFor. The series'
    // 2-against-16-connection client under the flat queue has ratio 0.22
    // (fires); round-robin about 0.96 (quiet).
    unfairRatio: 0.5,
    unfairBacklogged: 0.5,
    unfairMinEntitledRate: 1,
    unfairFor: '15m',
    unfairSeverity: 'warning',

    // --- NfsdtopClassStarved ---------------------------------------------
    // Backlogged at least starvedBacklogged of the time but at most
    // starvedRatio of its entitled dispatches (none at all while the
    // server dispatched nothing counts too), for starvedFor.
    starvedRatio: 0.05,
    starvedBacklogged: 0.9,
    starvedFor: '5m',
    starvedSeverity: 'critical',

    // --- NfsdtopQueueWaitHigh --------------------------------------------
    // p99 queue wait over rateWindow above waitP99Seconds with at least
    // waitMinRate waits/s behind it, for waitFor. Keep it on a bucket
    // boundary of nfsdtopd's histogram (powers of two microseconds: ...
    // 0.131072 0.262144 0.524288 1.048576 ...): then "p99 > threshold"
    // means exactly "more than 1% of waits took longer".
    waitP99Seconds: 0.524288,
    waitMinRate: 1,
    waitFor: '10m',
    waitSeverity: 'warning',

    // --- NfsdtopEventsLost -----------------------------------------------
    // More than eventsLostMin events of a tracepoint lost (ring buffer
    // full) within rateWindow, for eventsLostFor.
    eventsLostMin: 0,
    eventsLostFor: '2m',
    eventsLostSeverity: 'warning',

    // --- NfsdtopAgentDown ------------------------------------------------
    // Prometheus cannot scrape nfsdtopd (up == 0) or has no such target,
    // for agentDownFor.
    agentDownFor: '5m',
    agentDownSeverity: 'warning',

    // --- Dashboards ------------------------------------------------------
    // How many series the "busiest N" panels show.
    topK: 10,
    // Fairness-ratio colours: red below unfairRatio, green from this up.
    ratioFairFrom: 0.9,
    // Queue-wait colours: orange from this, red from waitP99Seconds.
    waitWarnSeconds: 0.131072,
  },
}
