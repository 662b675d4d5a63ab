// The overview dashboard, nfsdtop / NFS dispatch fairness (uid
// nfsdtop-overview): who gets the threads, who waits, the server's
// threads, what clients do, and nfsdtopd itself.
local l = import 'lib.libsonnet';

function(c)
  local inst = l.inst, cls = l.cls, ri = l.ri;
  local ratioThresholds = l.steps([[null, 'red'], [c.unfairRatio, 'orange'], [c.ratioFairFrom, 'green']]);
  // Busy threads over threads: near 1 every nfsd thread is in service and
  // requests wait on the ready queue for one.
  local saturationThresholds = l.steps([[null, 'green'], [0.75, 'orange'], [0.9, 'red']]);
  // Red from NfsdtopQueueWaitHigh's threshold (a histogram bucket boundary).
  local waitThresholds = l.steps([[null, 'green'], [c.waitWarnSeconds, 'orange'], [c.waitP99Seconds, 'red']]);
  local topk(e) = 'topk(%d, %s)' % [c.topK, e];
  local in5m(e) = std.strReplace(e, ri, '5m');
  local p(panel, w, h) = { panel: panel, w: w, h: h };
  local row(title) = { row: title };
  // Peers and classes below their fair share: what an operator opens the
  // dashboard for, so first.
  local victims = l.timeseries('Below their fair share', "Peers and classes backlogged and below nfsdtopd's --unfair-ratio (default 0.5) of their fair share over about the last minute, and how many of them have no series of their own (folded beyond the top K). The list: curl http://NFSDTOPD:9847/api/v1/unfair.",
                               [['sum by (instance, kind) (nfsdtop_unfair_entities{%s})' % inst, '{{kind}} below'],
                                ['sum by (instance, kind) (nfsdtop_unfair_entities_folded{%s})' % inst, '{{kind}} below, folded']],
                               'none', min=0);
  local drilldown = '/d/%s/nfsdtop-class-and-peers?${__url_time_range}&var-datasource=${datasource}&var-job=${job}' % l.drilldownUid;
  l.dashboard(
    l.overviewUid,
    'nfsdtop / NFS dispatch fairness',
    'How a Linux NFS server\'s RPC dispatch is shared among clients (nfsdtopd metrics). Without a class map every client address is its own class.',
    l.layout([
      row('Summary'),
      p(victims, 24, 6),
      p(l.stat('Dispatches/s', 'svc_xprt_dequeue events per second, all classes.',
               'sum(rate(nfsdtop_dispatches_total{%s}[%s]))' % [inst, ri], 'reqps'), 4, 4),
      p(l.stat("Jain's index", "Jain's fairness index over the fairness ratios of the classes backlogged in the interval: 1 = every backlogged class got its fair turn, 1/n = one class got all of them. class=\"other\" (folded) is left out.",
               l.jain(inst), 'none', ratioThresholds, legend='{{instance}}', decimals=3), 4, 4),
      p(l.stat('Backlogged classes', 'Classes with a transport on the ready queue now.',
               'sum(nfsdtop_class_backlogged{%s, class!="other"})' % inst, 'none'), 4, 4),
      p(l.stat('Queue wait p99', '99th percentile of ready -> dispatched, all classes.',
               l.quantile('0.99', inst, ''), 's', waitThresholds), 4, 4),
      p(l.stat('Events lost', "Events dropped (ring buffer full) in the dashboard's time range. Anything but 0 means every number here undercounts.",
               'sum(increase(nfsdtop_events_lost_total{%s}[$__range]))' % inst, 'none',
               l.steps([[null, 'green'], [1, 'red']])), 4, 4),
      p(l.panel('table', 'Source', "Where nfsdtopd's events come from, and how it measures queue wait.",
                [l.target('nfsdtop_source_info{%s}' % inst, instant=true, format='table')],
                options={ showHeader: true, cellHeight: 'sm' },
                extra={ transformations: [{ id: 'organize', options: {
                  excludeByName: { Time: true, Value: true, __name__: true, job: true },
                  renameByName: { wait_source: 'wait source' },
                } }] }), 4, 4),

      row('Who gets the threads'),
      p(l.timeseries('Share of dispatches per class',
                     "Each class's share of all dispatches (stacked to 100%). Under today's flat queue a class's share follows its connection count; see the fairness ratio.",
                     [[l.share('nfsdtop_class_dispatches_total', cls), '{{class}}']], 'percentunit', stack=true, min=0, max=1), 12, 9),
      p(l.timeseries('Fairness ratio per class',
                     'Dispatches / fair-share entitlement while backlogged. 1 = its fair turn, < 1 = less (0.5 = half), > 1 = more. Only backlogged classes have one.',
                     [[l.ratio(cls, 'class', 'instance, class'), '{{class}}']], 'none',
                     thresholds=ratioThresholds, min=0,
                     links=[{ title: 'Drill down into ${__field.labels.class}', url: drilldown + '&var-class=${__field.labels.class}' }]), 12, 9),
      p(l.timeseries('Dispatch rate per class', 'Dispatches per second per class.',
                     [[l.rate('nfsdtop_class_dispatches_total', cls, 'instance, class'), '{{class}}']], 'reqps', min=0), 8, 8),
      p(l.timeseries("Jain's index", "Over the backlogged classes' fairness ratios.",
                     [[l.jain(inst), '{{instance}}']], 'none', thresholds=ratioThresholds, min=0, max=1), 8, 8),
      p(l.timeseries('Execution (thread-time) share per class',
                     'Share of nfsd thread time. Round-robin equalises dispatches, not thread time: a class with long requests holds threads longer.',
                     [[l.share('nfsdtop_class_execution_seconds_total', cls), '{{class}}']], 'percentunit', stack=true, min=0, max=1), 8, 8),
      p(l.panel('table', 'Classes now',
                'Per class over the last 5 minutes: share, fair share (entitlement / all dispatches), fairness ratio, time backlogged, thread-time share, connections.',
                [
                  l.target(in5m(l.share('nfsdtop_class_dispatches_total', cls)), instant=true, format='table'),
                  l.target(in5m(l.fairShare(cls)), instant=true, format='table'),
                  l.target(in5m(l.ratio(cls, 'class', 'instance, class')), instant=true, format='table'),
                  l.target(in5m(l.rate('nfsdtop_class_backlogged_seconds_total', cls, 'instance, class')), instant=true, format='table'),
                  l.target(in5m(l.share('nfsdtop_class_execution_seconds_total', cls)), instant=true, format='table'),
                  l.target('sum by (instance, class) (nfsdtop_class_connections{%s})' % cls, instant=true, format='table'),
                ],
                options={ showHeader: true, cellHeight: 'sm', sortBy: [{ displayName: 'fairness', desc: false }] },
                defaults={ custom: { align: 'auto' } },
                overrides=[
                  { matcher: { id: 'byRegexp', options: 'share|fair share|backlogged|thread time' },
                    properties: [{ id: 'unit', value: 'percentunit' }, { id: 'decimals', value: 1 }] },
                  { matcher: { id: 'byName', options: 'fairness' },
                    properties: [{ id: 'decimals', value: 2 }, { id: 'thresholds', value: ratioThresholds },
                                 { id: 'custom.cellOptions', value: { type: 'color-background' } }] },
                  { matcher: { id: 'byName', options: 'class' },
                    properties: [{ id: 'links', value: [{ title: 'Drill down into ${__value.raw}', url: drilldown + '&var-class=${__value.raw}' }] }] },
                ],
                extra={ transformations: [
                  { id: 'merge', options: {} },
                  { id: 'organize', options: {
                    excludeByName: { Time: true },
                    renameByName: { 'Value #A': 'share', 'Value #B': 'fair share', 'Value #C': 'fairness',
                                    'Value #D': 'backlogged', 'Value #E': 'thread time', 'Value #F': 'connections' },
                  } },
                ] }), 24, 9),

      row('Who waits'),
      p(l.timeseries('Backlogged fraction per class',
                     'Fraction of time the class had work queued (1 = always waiting for a thread).',
                     [[l.rate('nfsdtop_class_backlogged_seconds_total', cls, 'instance, class'), '{{class}}']],
                     'percentunit', min=0, max=1), 8, 8),
      p(l.timeseries('Backlogged classes', 'Classes with work queued, sampled at each scrape.',
                     [['sum by (instance) (nfsdtop_class_backlogged{%s, class!="other"})' % inst, '{{instance}}']],
                     'none', min=0), 8, 8),
      p(l.timeseries('Connections per class', "Transports (connections) per class now. Under the flat queue a backlogged class's share follows its connection count.",
                     [['sum by (instance, class) (nfsdtop_class_connections{%s})' % cls, '{{class}}']],
                     'none', min=0), 8, 8),
      p(l.heatmap('Queue wait (selected classes)',
                  'Distribution of ready -> dispatched times (per interval).',
                  'sum by (le) (increase(nfsdtop_class_queue_wait_seconds_bucket{%s}[%s]))' % [cls, ri]), 12, 9),
      p(l.timeseries('Queue wait p99 per class', '99th percentile of ready -> dispatched, per class; dashed: p50.',
                     [[l.quantile('0.99', cls, 'instance, class'), 'p99 {{class}}'],
                      [l.quantile('0.5', cls, 'instance, class'), 'p50 {{class}}']], 's', min=0,
                     overrides=[{ matcher: { id: 'byRegexp', options: 'p50 .*' },
                                  properties: [{ id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } }] }]), 12, 9),
    ] + (import 'overview-server.libsonnet')(c, p, row, topk)),
    l.commonVars(classMulti=true),
    [
      { title: 'Class and peers', type: 'link', icon: 'dashboard', keepTime: true, includeVars: true,
        url: '/d/%s/nfsdtop-class-and-peers' % l.drilldownUid },
      { title: 'Runbooks', type: 'link', icon: 'doc', targetBlank: true, url: c.runbookBaseUrl },
    ],
  )
