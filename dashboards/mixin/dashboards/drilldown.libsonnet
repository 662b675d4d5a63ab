// The drill-down dashboard, nfsdtop / class and peers (uid
// nfsdtop-drilldown): one class (one client without a class map), its
// peers and their procedures.
local l = import 'lib.libsonnet';

function(c)
  local inst = l.inst, one = l.cls, peer = l.peer, ri = l.ri;
  local ratioThresholds = l.steps([[null, 'red'], [c.unfairRatio, 'orange'], [c.ratioFairFrom, 'green']]);
  local waitThresholds = l.steps([[null, 'green'], [c.waitWarnSeconds, 'orange'], [c.waitP99Seconds, 'red']]);
  local p(panel, w, h) = { panel: panel, w: w, h: h };
  local row(title) = { row: title };
  l.dashboard(
    l.drilldownUid,
    'nfsdtop / class and peers',
    'One class (one client without a class map) and the peers in it.',
    l.layout([
      row('Class $class'),
      p(l.stat('Share', 'Share of all dispatches.', l.share('nfsdtop_class_dispatches_total', one), 'percentunit', decimals=1), 6, 4),
      p(l.stat('Fair share', 'Entitlement / all dispatches: the share it should have had.', l.fairShare(one), 'percentunit', decimals=1), 6, 4),
      p(l.stat('Fairness ratio', 'Dispatches / entitled. < 1: less than its fair turn.',
               l.ratio(one, 'class', 'instance, class'), 'none', ratioThresholds, decimals=2), 6, 4),
      p(l.stat('Queue wait p99', '99th percentile of ready -> dispatched for this class.',
               l.quantile('0.99', one, 'instance, class'), 's', waitThresholds), 6, 4),
      p(l.timeseries('Share vs fair share', 'Its share of dispatches against the share it was entitled to while backlogged.',
                     [[l.share('nfsdtop_class_dispatches_total', one), 'share {{class}}'],
                      [l.fairShare(one), 'fair share {{class}}']], 'percentunit', min=0, max=1), 12, 8),
      p(l.heatmap('Queue wait', 'Distribution of ready -> dispatched times for this class.',
                  'sum by (le) (increase(nfsdtop_class_queue_wait_seconds_bucket{%s}[%s]))' % [one, ri]), 12, 8),
      p(l.timeseries('Threads: $class and the server',
                     "nfsd threads this class's requests kept busy (its thread seconds per second) against all busy threads and the threads nfsd runs (dashed). Only when the server's busy threads reach its threads do requests queue: then a class below its fair share waits for threads the others hold.",
                     [[l.rate('nfsdtop_class_execution_seconds_total', one, 'instance, class'), '{{class}}'],
                      [l.busyThreads(inst), 'busy, all classes {{instance}}'],
                      ['sum by (instance) (nfsdtop_server_threads{%s})' % inst, 'threads {{instance}}']],
                     'none', min=0, overrides=[l.dashed('threads .*')]), 24, 7),

      row('Peers of $class (top K; peer="other" is the rest)'),
      p(l.timeseries('Dispatch rate per peer', 'Dispatches per second.',
                     [[l.rate('nfsdtop_peer_dispatches_total', peer, 'instance, peer'), '{{peer}}']], 'reqps', stack=true, min=0), 12, 8),
      p(l.timeseries('Fairness ratio per peer', 'Per-peer dispatches / entitlement (peers compete as entities of their own here, whatever the class map says).',
                     [[l.ratio(peer, 'peer', 'instance, peer'), '{{peer}}']], 'none', thresholds=ratioThresholds, min=0), 12, 8),
      p(l.timeseries('Backlogged fraction per peer', 'Fraction of time the peer had work queued.',
                     [[l.rate('nfsdtop_peer_backlogged_seconds_total', peer, 'instance, peer'), '{{peer}}']], 'percentunit', min=0, max=1), 8, 8),
      p(l.timeseries('Thread time per peer', 'nfsd thread seconds per second (threads busy).',
                     [[l.rate('nfsdtop_peer_execution_seconds_total', peer, 'instance, peer'), '{{peer}}']], 'none', stack=true, min=0), 8, 8),
      p(l.timeseries('Operations per peer', 'Requests nfsd executed per second for each peer.',
                     [[l.rate('nfsdtop_peer_requests_total', peer, 'instance, peer'), '{{peer}}']], 'reqps', stack=true, min=0), 12, 8),
      p(l.timeseries('Bytes per peer', 'RPC bytes per second: sent (reads) above the axis, received (writes) below. Empty on classic tracepoints.',
                     [[l.rate('nfsdtop_peer_sent_bytes_total', peer, 'instance, peer'), 'sent {{peer}}'],
                      ['-' + l.rate('nfsdtop_peer_received_bytes_total', peer, 'instance, peer'), 'received {{peer}}']], 'Bps'), 12, 8),
      p(l.timeseries('Connections per peer', 'Transports per peer now.',
                     [['sum by (instance, peer) (nfsdtop_peer_connections{%s})' % peer, '{{peer}}']], 'none', min=0), 8, 8),
      p(l.timeseries('Peers folded into "other"', 'Peers beyond the top K, summed into peer="other".',
                     [['sum by (instance) (nfsdtop_peers_folded{%s})' % inst, '{{instance}}']], 'none', min=0), 24, 5),

      row('Procedures of $peer (labelled peers only: none for peer="other")'),
      p(l.timeseries('Requests per peer and procedure',
                     "Requests nfsd executed per second for each chosen peer by RPC procedure (the kernel's name: READ, WRITE, GETATTR, ...), stacked. Choose one peer to see its own mix.",
                     [[l.rate('nfsdtop_peer_procedure_requests_total', peer, 'instance, peer, procedure'), '{{peer}} {{procedure}}']],
                     'reqps', stack=true, min=0), 12, 8),
      p(l.timeseries('Mean execution time per peer and procedure',
                     "nfsd thread time per request of each chosen peer's procedures (rate of execution seconds / rate of requests), queue wait not included. Compare with the same procedure on the overview: slower for one peer only points at what it works on (large I/O, a slow export), not at the server.",
                     [[l.meanPer('nfsdtop_peer_procedure_execution_seconds_total', 'nfsdtop_peer_procedure_requests_total', peer, 'instance, peer, procedure'),
                       '{{peer}} {{procedure}}']], 's', min=0), 12, 8),
      p(l.timeseries('NFSv4 operations per peer',
                     "NFSv4 operations per second inside each chosen peer's COMPOUNDs (SEQUENCE, PUTFH, READ, WRITE, GETATTR...: what an NFSv4 client's requests are made of), stacked; the %d busiest. Only with nfsdtopd's nfs4_ops = true (--nfs4-ops: it costs, see BENCHMARKS.md) and NFSv4 clients; empty otherwise." % c.topK,
                     [['topk(%d, %s)' % [c.topK, l.rate('nfsdtop_peer_nfs4_operations_total', peer, 'instance, peer, operation')], '{{peer}} {{operation}}']],
                     'ops', stack=true, min=0), 24, 8),
    ]),
    l.commonVars(classMulti=false) + [
      l.varQuery('peer', 'Peer', 'label_values(nfsdtop_peer_dispatches_total{job=~"$job", instance=~"$instance", class=~"$class"}, peer)',
                 multi=true, includeAll=true, allValue='.+'),
    ],
    [{ title: 'Overview', type: 'link', icon: 'dashboard', keepTime: true, includeVars: true,
       url: '/d/%s/nfsdtop-nfs-dispatch-fairness' % l.overviewUid }],
  )
