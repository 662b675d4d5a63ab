// prometheusAlerts: the five nfsdtop alerts. Their descriptions fill in
// the recording rules' values for the alerted class; each says over which
// window, and the backlogged fraction is over the time observed, so a
// series younger than the window does not read as "queued half the time".
{
  prometheusAlerts+:: {
    local c = $._config,
    local w = c.rateWindow,
    local r = $.recorded(w),
    local num = (import '../lib/text.libsonnet').number,
    local runbook(alert) = c.runbookBaseUrl + '#' + std.asciiLower(alert),
    // The alerted class's value of a recorded series, as a percentage.
    local of(series) =
      '{{ with printf "%s{job=%%q,instance=%%q,class=%%q}" $labels.job $labels.instance $labels.class | query }}{{ . | first | value | humanizePercentage }}{{ end }}' % series,
    local queued = of(r.backloggedObserved) + ' of the time observed in the last ' + w,
    groups+: [{
      name: 'nfsdtop.alerts',
      [if c.ruleInterval != null then 'interval']: c.ruleInterval,
      rules: [
        {
          alert: 'NfsdtopUnfairShare',
          expr: |||
            %(fairness)s{class!="other"} < %(ratio)s
            and on (job, instance, class)
            %(backlogged)s >= %(backloggedMin)s
            and on (job, instance, class)
            %(entitled)s >= %(entitledMin)s
          ||| % {
            fairness: r.fairness,
            ratio: num(c.unfairRatio),
            backlogged: r.backlogged,
            backloggedMin: num(c.unfairBacklogged),
            entitled: r.entitled,
            entitledMin: num(c.unfairMinEntitledRate),
          },
          'for': c.unfairFor,
          labels: { severity: c.unfairSeverity },
          annotations: {
            summary: 'NFS class {{ $labels.class }} gets {{ $value | humanizePercentage }} of its fair share of nfsd dispatches',
            description: std.join(' ', [
              'On {{ $labels.instance }}, class {{ $labels.class }} received',
              '{{ $value | humanizePercentage }} of the dispatches it was entitled to over the last %s' % w,
              '(alert below {{ %s | humanizePercentage }}) while it had work queued' % num(c.unfairRatio),
              queued + ': its share of all dispatches was',
              of(r.share) + ', its fair share',
              of(r.fairShare) + '. Under the flat ready queue this is usually a class with fewer',
              'connections than its neighbours.',
            ]),
            runbook_url: runbook('NfsdtopUnfairShare'),
          },
        },
        {
          alert: 'NfsdtopClassStarved',
          expr: |||
            (
              %(dispatches)s
              or on (job, instance, class) 0 * %(backlogged)s
            )
            <= on (job, instance, class)
            (
              %(ratio)s * %(entitled)s
              or on (job, instance, class) 0 * %(backlogged)s
            )
            and on (job, instance, class)
            %(backlogged)s{class!="other"} >= %(backloggedMin)s
          ||| % {
            dispatches: r.dispatches,
            backlogged: r.backlogged,
            ratio: num(c.starvedRatio),
            entitled: r.entitled,
            backloggedMin: num(c.starvedBacklogged),
          },
          'for': c.starvedFor,
          labels: { severity: c.starvedSeverity },
          annotations: {
            summary: 'NFS class {{ $labels.class }} is starved: work queued, {{ $value | humanize }} dispatches/s',
            description: std.join(' ', [
              'On {{ $labels.instance }}, class {{ $labels.class }} had work queued',
              queued + ' but was dispatched only {{ $value | humanize }} times per second',
              '(rate over %s), at most {{ %s | humanizePercentage }} of what it was entitled to.' % [w, num(c.starvedRatio)],
              "Its clients' requests are stalling; if every class is starved, nfsd itself is stuck.",
            ]),
            runbook_url: runbook('NfsdtopClassStarved'),
          },
        },
        {
          alert: 'NfsdtopQueueWaitHigh',
          expr: |||
            %(p99)s > %(max)s
            and on (job, instance, class)
            %(waits)s >= %(minRate)s
          ||| % { p99: r.waitP99, max: num(c.waitP99Seconds), waits: r.waits, minRate: num(c.waitMinRate) },
          'for': c.waitFor,
          labels: { severity: c.waitSeverity },
          annotations: {
            summary: 'NFS class {{ $labels.class }} waits {{ $value | humanizeDuration }} (p99) for an nfsd thread',
            description: std.join(' ', [
              'On {{ $labels.instance }}, the 99th percentile of the time class',
              "{{ $labels.class }}'s transports sat ready before a thread took them was",
              '{{ $value | humanizeDuration }} over the last %s (alert above {{ %s | humanizeDuration }}).' % [w, num(c.waitP99Seconds)],
            ]),
            runbook_url: runbook('NfsdtopQueueWaitHigh'),
          },
        },
        {
          alert: 'NfsdtopEventsLost',
          expr: 'sum by (job, instance, tracepoint) (increase(nfsdtop_events_lost_total{%s}[%s])) > %s\n'
                % [c.nfsdtopSelector, w, num(c.eventsLostMin)],
          'for': c.eventsLostFor,
          labels: { severity: c.eventsLostSeverity },
          annotations: {
            summary: 'nfsdtop lost {{ $value | humanize }} {{ $labels.tracepoint }} events in %s' % w,
            description: std.join(' ', [
              'nfsdtopd on {{ $labels.instance }} lost {{ $value | humanize }} {{ $labels.tracepoint }}',
              'events in the last %s (ring buffer full). Shares, fairness ratios and' % w,
              'waits computed meanwhile undercount and cannot be trusted.',
            ]),
            runbook_url: runbook('NfsdtopEventsLost'),
          },
        },
        {
          alert: 'NfsdtopAgentDown',
          expr: 'up{%(s)s} == 0\nor\nabsent(up{%(s)s})\n' % { s: c.nfsdtopSelector },
          'for': c.agentDownFor,
          labels: { severity: c.agentDownSeverity },
          annotations: {
            summary: 'nfsdtopd {{ with $labels.instance }}{{ . }}{{ else }}(%s){{ end }} is not being scraped' % c.nfsdtopSelector,
            description: std.join(' ', [
              'Prometheus {{ with $labels.instance }}cannot scrape nfsdtopd at {{ . }}{{ else }}has no target matching {%s} at all{{ end }}' % c.nfsdtopSelector,
              '(for %s). NFS dispatch fairness is not being measured, and none' % c.agentDownFor,
              'of the other nfsdtop alerts can fire.',
            ]),
            runbook_url: runbook('NfsdtopAgentDown'),
          },
        },
      ],
    }],
  },
}
