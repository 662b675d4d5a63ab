// Building blocks of the Grafana dashboards: PromQL for shares, ratios and
// quantiles over raw nfsdtop_* series with $__rate_interval (so the
// dashboards work without the recording rules, with the same formulas),
// panels, variables and the left-to-right layout.
{
  overviewUid: 'nfsdtop-overview',
  drilldownUid: 'nfsdtop-drilldown',
  ds: { type: 'prometheus', uid: '${datasource}' },
  ri: '$__rate_interval',

  // Label selectors, filled by the template variables.
  inst: 'job=~"$job", instance=~"$instance"',
  cls: self.inst + ', class=~"$class"',
  peer: self.cls + ', peer=~"$peer"',
  clsNamed: self.cls + ', class!="other"',  // the labelled classes, not the folded rest

  rate(metric, sel, by='class'):: 'sum by (%s) (rate(%s{%s}[%s]))' % [by, metric, sel, self.ri],

  // Fairness ratio: dispatches / entitled, for entities entitled to any.
  ratio(sel, prefix, by)::
    '%s\n/\n(%s > 0)' % [self.rate('nfsdtop_%s_dispatches_total' % prefix, sel, by),
                         self.rate('nfsdtop_%s_entitled_dispatches_total' % prefix, sel, by)],

  // Share of the whole server: num by (instance, key) over den (default:
  // num itself) by instance for all classes.
  share(num, sel, key='class', den=null)::
    '%s\n/ ignoring (%s) group_left ()\n(%s > 0)'
    % [self.rate(num, sel, 'instance, ' + key), key, self.rate(if den == null then num else den, self.inst, 'instance')],

  // Entitled dispatches over all dispatches: the share it should have had.
  fairShare(sel):: self.share('nfsdtop_class_entitled_dispatches_total', sel, den='nfsdtop_class_dispatches_total'),

  jain(sel)::
    local r = self.ratio(sel + ', class!="other"', 'class', 'instance, class');
    'sum by (instance) (\n%s\n) ^ 2\n/\n(\n  count by (instance) (\n%s\n)\n  *\n  sum by (instance) ((\n%s\n) ^ 2)\n)' % [r, r, r],

  // Classic buckets, or the native histogram where Prometheus stores one.
  quantile(q, sel, by, metric='nfsdtop_class_queue_wait_seconds')::
    'histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[%s])))\nor\nhistogram_quantile(%s, sum %s(rate(%s{%s}[%s])))'
    % [q, if by != '' then by + ', le' else 'le', metric, sel, self.ri, q, if by != '' then 'by (%s) ' % by else '', metric, sel, self.ri],

  // Mean of num per den (thread seconds per request), for groups with any.
  meanPer(num, den, sel, by):: '%s\n/\n(%s > 0)' % [self.rate(num, sel, by), self.rate(den, sel, by)],

  // Mean nfsd threads executing requests; per pool too when `by` names it.
  busyThreads(sel, by='instance')::
    self.rate('nfsdtop_server%s_busy_thread_seconds_total' % (if std.length(std.findSubstr('pool', by)) > 0 then '_pool' else ''), sel, by),

  // Threads that ran: the mean running where nfsd starts and stops
  // threads (Linux 7.0+), else the threads nfsd has.
  threadsRan(sel):: '(%s\nor\nsum by (instance) (nfsdtop_server_threads{%s}))' % [self.rate('nfsdtop_server_running_thread_seconds_total', sel, 'instance'), sel],

  // Busy threads / threads that ran, per nfsdtopd (0..1).
  saturation(sel):: '%s\n/\n(%s > 0)' % [self.busyThreads(sel), self.threadsRan(sel)],

  target(expr, legend='', instant=false, format=null)::
    { datasource: $.ds, refId: 'A', expr: expr, legendFormat: if legend == '' then '__auto' else legend, range: !instant, instant: instant }
    + (if format != null then { format: format } else {}),

  // targets: target objects or [expr, legend] pairs; refIds A, B, ...
  panel(kind, title, desc, targets, unit=null, defaults={}, overrides=[], options={}, extra={})::
    local ts = [if std.isArray(t) then $.target(t[0], if std.length(t) > 1 then t[1] else '') else t for t in targets];
    {
      type: kind,
      title: title,
      description: desc,
      datasource: $.ds,
      targets: [ts[i] { refId: std.char(65 + i) } for i in std.range(0, std.length(ts) - 1)],
      fieldConfig: { defaults: { custom: {} } + (if unit != null then { unit: unit } else {}) + defaults, overrides: overrides },
      options: options,
    } + extra,

  timeseries(title, desc, targets, unit=null, stack=false, thresholds=null, min=null, max=null, links=null, overrides=[])::
    local custom = {
      drawStyle: 'line', lineWidth: 1, fillOpacity: if stack then 40 else 10, showPoints: 'never', spanNulls: false,
      stacking: { mode: if stack then 'normal' else 'none', group: 'A' },
    } + (if thresholds != null then { thresholdsStyle: { mode: 'dashed' } } else {});
    $.panel('timeseries', title, desc, targets, unit,
            defaults={ custom: custom }
                     + (if min != null then { min: min } else {})
                     + (if max != null then { max: max } else {})
                     + (if thresholds != null then { thresholds: thresholds } else {})
                     + (if links != null then { links: links } else {}),
            overrides=overrides,
            options={
              legend: { displayMode: 'table', placement: 'right', calcs: ['lastNotNull', 'mean'], showLegend: true },
              tooltip: { mode: 'multi', sort: 'desc' },
            }),

  // Override: the series matching regex as unfilled dashed lines (a limit
  // such as the thread count, drawn against the values).
  dashed(regex):: {
    matcher: { id: 'byRegexp', options: regex },
    properties: [{ id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } }, { id: 'custom.fillOpacity', value: 0 }],
  },

  // Threshold steps from [value or null, colour] pairs.
  steps(pairs):: { mode: 'absolute', steps: [{ value: p[0], color: p[1] } for p in pairs] },

  stat(title, desc, expr, unit=null, thresholds=null, legend='', decimals=null)::
    $.panel('stat', title, desc, [$.target(expr, legend)], unit,
            defaults={ thresholds: if thresholds != null then thresholds else $.steps([[null, 'blue']]) }
                     + (if decimals != null then { decimals: decimals } else {}),
            options={
              reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
              colorMode: 'value', graphMode: 'area', textMode: 'auto', justifyMode: 'auto', orientation: 'auto',
            }),

  heatmap(title, desc, expr)::
    $.panel('heatmap', title, desc, [$.target(expr, '{{le}}', format='heatmap')], 's',
            options={
              calculate: false,
              cellGap: 1,
              color: { mode: 'scheme', scheme: 'Oranges', scale: 'exponential', exponent: 0.5, steps: 64 },
              yAxis: { axisPlacement: 'left', unit: 's' },
              rowsFrame: { layout: 'auto' },
              tooltip: { show: true, yHistogram: true },
              legend: { show: true },
              filterValues: { le: 1e-9 },
            }),

  varDatasource():: {
    type: 'datasource', name: 'datasource', label: 'Data source', query: 'prometheus',
    current: {}, hide: 0, refresh: 1, regex: '', options: [],
  },

  varQuery(name, label, query, multi=false, includeAll=false, allValue=null):: {
    type: 'query', name: name, label: label, datasource: $.ds,
    definition: query, query: { query: query, refId: name + '-var' },
    refresh: 2, sort: 1, multi: multi, includeAll: includeAll,
    current: {}, hide: 0, regex: '', options: [],
  } + (if allValue != null then { allValue: allValue } else {}),

  commonVars(classMulti):: [
    $.varDatasource(),
    $.varQuery('job', 'Job', 'label_values(nfsdtop_build_info, job)'),
    $.varQuery('instance', 'nfsdtopd', 'label_values(nfsdtop_build_info{job=~"$job"}, instance)',
               multi=true, includeAll=true, allValue='.+'),
    $.varQuery('class', 'Class', 'label_values(nfsdtop_class_dispatches_total{job=~"$job", instance=~"$instance"}, class)',
               multi=classMulti, includeAll=classMulti, allValue=if classMulti then '.+' else null),
  ],

  // Items: { row: TITLE } or { panel: P, w: W, h: H }, laid out left to
  // right in 24 columns, a row or a panel that does not fit starting a new
  // line; ids numbered from 1.
  layout(items)::
    // Every field bound to a local first: jsonnet does not cache object
    // fields, and a state built on the previous one would be re-evaluated
    // all the way back on each access.
    local step(st, it) =
      local x = st.x, y = st.y, rowH = st.rowH, id = st.id;
      local lineY = if x > 0 then y + rowH else y;
      if std.objectHas(it, 'row') then
        local panel = { type: 'row', title: it.row, id: id, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y: lineY }, panels: [] };
        { x: 0, y: lineY + 1, rowH: 0, id: id + 1, out: st.out + [panel] }
      else
        local wraps = x + it.w > 24;
        local px = if wraps then 0 else x, py = if wraps then lineY else y, h = if wraps then 0 else rowH;
        local panel = it.panel { id: id, gridPos: { h: it.h, w: it.w, x: px, y: py } };
        { x: px + it.w, y: py, rowH: std.max(h, it.h), id: id + 1, out: st.out + [panel] };
    std.foldl(step, items, { x: 0, y: 0, rowH: 0, id: 1, out: [] }).out,

  dashboard(uid, title, desc, panels, variables, links):: {
    uid: uid, title: title, description: desc,
    tags: ['nfsdtop', 'nfs', 'sunrpc'], timezone: 'browser', editable: true,
    graphTooltip: 1, refresh: '30s', schemaVersion: 39, version: 1,
    time: { from: 'now-1h', to: 'now' }, timepicker: {},
    fiscalYearStartMonth: 0, liveNow: false, weekStart: '',
    annotations: { list: [
      {
        builtIn: 1, datasource: { type: 'grafana', uid: '-- Grafana --' }, enable: true,
        hide: true, iconColor: 'rgba(0, 211, 255, 1)', name: 'Annotations & Alerts', type: 'dashboard',
      },
      {
        datasource: $.ds, enable: true, iconColor: 'red', name: 'nfsdtop alerts',
        expr: 'ALERTS{alertname=~"Nfsdtop.*", alertstate="firing", job=~"$job"}',
        step: '60s', titleFormat: '{{alertname}}', textFormat: '{{class}} {{instance}}', useValueForTime: false,
      },
    ] },
    links: links,
    templating: { list: variables },
    panels: panels,
  },
}
