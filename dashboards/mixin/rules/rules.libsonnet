// prometheusRules: the recording rules, per class (job, instance, class)
// and per nfsdtopd, over _config.rateWindow. Without a class map every
// client address is its own class, so "class" reads "client".
{
  // The recording rules' names, for the alerts and the tests.
  recorded(w):: {
    dispatches: 'class:nfsdtop_dispatches:rate' + w,
    entitled: 'class:nfsdtop_entitled_dispatches:rate' + w,
    backlogged: 'class:nfsdtop_backlogged:ratio_rate' + w,
    backloggedObserved: 'class:nfsdtop_backlogged:ratio_observed' + w,
    fairness: 'class:nfsdtop_fairness:ratio_rate' + w,
    share: 'class:nfsdtop_dispatch_share:ratio_rate' + w,
    fairShare: 'class:nfsdtop_fair_share:ratio_rate' + w,
    execution: 'class:nfsdtop_execution:ratio_rate' + w,
    waits: 'class:nfsdtop_queue_waits:rate' + w,
    waitP99: 'class:nfsdtop_queue_wait_seconds:p99_rate' + w,
    instanceWaitP99: 'instance:nfsdtop_queue_wait_seconds:p99_rate' + w,
    instanceDispatches: 'instance:nfsdtop_dispatches:rate' + w,
    jain: 'instance:nfsdtop_fairness:jain_rate' + w,
  },

  prometheusRules+:: {
    local c = $._config,
    local w = c.rateWindow,
    local r = $.recorded(w),
    local sel = '{' + c.nfsdtopSelector + '}',
    local rate(m) = 'rate(%s%s[%s])' % [m, sel, w],
    local perClass(m) = 'sum by (job, instance, class) (%s)' % rate(m),
    local allDispatches = '(sum by (job, instance) (%s) > 0)' % r.dispatches,
    local backlogged = 'nfsdtop_class_backlogged_seconds_total' + sel,
    // Over the samples of the last window: a subquery step no longer
    // than the scrape interval finds the first of them exactly.
    local sub(e) = '%s[%s:%s]' % [e, w, c.scrapeInterval],
    local named = '{class!="other"}',
    groups+: [{
      name: 'nfsdtop.recording',
      [if c.ruleInterval != null then 'interval']: c.ruleInterval,
      rules: [
        // Dispatches per second (svc_xprt_dequeue events).
        { record: r.dispatches, expr: perClass('nfsdtop_class_dispatches_total') },
        // Fair-share entitlement per second: at each dispatch every
        // backlogged class earns 1/n, n = backlogged classes then.
        { record: r.entitled, expr: perClass('nfsdtop_class_entitled_dispatches_total') },
        // Fraction of the window (0..1) with work queued, as rate()
        // gives it: a series younger than the window counts the part
        // before its first sample as not queued. The alerts gate on it,
        // so they wait for enough data.
        { record: r.backlogged, expr: perClass('nfsdtop_class_backlogged_seconds_total') },
        // The same fraction over the time actually observed: between the
        // first and the last sample of the window, no extrapolation. What
        // the alerts' descriptions quote, right for a young series too.
        {
          record: r.backloggedObserved,
          expr: |||
            (
              sum by (job, instance, class) (%(x)s)
              - sum by (job, instance, class) (min_over_time(%(xs)s))
            )
            / on (job, instance, class)
            (
              max by (job, instance, class) (timestamp(%(x)s))
              - min by (job, instance, class) (min_over_time(%(ts)s))
              > 0
            )
          ||| % { x: backlogged, xs: sub(backlogged), ts: sub('timestamp(%s)' % backlogged) },
        },
        // Fairness ratio: dispatches / entitled. 1 = its fair turn, < 1 =
        // less. Only for classes backlogged during the window.
        {
          record: r.fairness,
          expr: '%s\n/ on (job, instance, class)\n(%s > 0)\n' % [r.dispatches, r.entitled],
        },
        // Share of all dispatches (0..1): the series' "share of the pool".
        {
          record: r.share,
          expr: '%s\n/ ignoring (class) group_left ()\n%s\n' % [r.dispatches, allDispatches],
        },
        // Fair share (0..1): the share the class was entitled to.
        {
          record: r.fairShare,
          expr: '%s\n/ ignoring (class) group_left ()\n%s\n' % [r.entitled, allDispatches],
        },
        // Share of nfsd thread time (0..1). Dispatch fairness is not
        // thread-time fairness: long requests hold threads longer.
        {
          record: r.execution,
          expr: '%s\n/ ignoring (class) group_left ()\n(sum by (job, instance) (%s) > 0)\n'
                % [perClass('nfsdtop_class_execution_seconds_total'), rate('nfsdtop_class_execution_seconds_total')],
        },
        // Queue waits observed per second (how much data is behind the p99).
        // Each histogram is read as classic buckets (`_count`, `_bucket`)
        // or, where Prometheus stores it as a native histogram (protobuf
        // scrapes with native histograms on, which keep no `_bucket`
        // series), through the native series.
        {
          record: r.waits,
          expr: '%s\nor\nsum by (job, instance, class) (histogram_count(%s))'
                % [perClass('nfsdtop_class_queue_wait_seconds_count'), rate('nfsdtop_class_queue_wait_seconds')],
        },
        // p99 queue wait per class and for the whole server, in seconds.
        {
          record: r.waitP99,
          expr: 'histogram_quantile(0.99, sum by (job, instance, class, le) (%s))\nor\nhistogram_quantile(0.99, sum by (job, instance, class) (%s))'
                % [rate('nfsdtop_class_queue_wait_seconds_bucket'), rate('nfsdtop_class_queue_wait_seconds')],
        },
        {
          record: r.instanceWaitP99,
          expr: 'histogram_quantile(0.99, sum by (job, instance, le) (%s))\nor\nhistogram_quantile(0.99, sum by (job, instance) (%s))'
                % [rate('nfsdtop_class_queue_wait_seconds_bucket'), rate('nfsdtop_class_queue_wait_seconds')],
        },
        { record: r.instanceDispatches, expr: 'sum by (job, instance) (%s)' % r.dispatches },
        // Jain's index over the fairness ratios of the classes backlogged
        // in the window: (sum x)^2 / (n * sum x^2), 1 = fair, 1/n = one
        // class got everything. class="other" (the classes folded beyond
        // nfsdtopd's top K, summed) is not one entity: left out here and
        // in the alerts.
        {
          record: r.jain,
          expr: |||
            sum by (job, instance) (%(f)s) ^ 2
            / on (job, instance)
            (
              count by (job, instance) (%(f)s)
              * on (job, instance)
              sum by (job, instance) (%(f)s ^ 2)
            )
          ||| % { f: r.fairness + named },
        },
      ],
    }],
  },
}
