// alertTiming: how long after its condition starts each alert goes pending
// and fires, computed from the rules as configured (window, gate
// fractions, `for:`) and the Prometheus they run on (_config's scrape and
// evaluation intervals). RUNBOOKS.md quotes `figure` for the shipped
// _config; scripts/e2e/30-alerts-live.sh measures NfsdtopUnfairShare
// against the same computation for its fast profile.
//
// "The condition starts" is the first sample of a class already in that
// state (nfsdtopd or the class starting so, as the demo does), or the first
// failed scrape / lost event. Bounds, in seconds:
//  - gated by a fraction g of the window (backlogged >= g): rate() over a
//    young series counts only the observed time (plus at most half a scrape
//    interval of extrapolation), so the recorded fraction reaches g after
//    g*W - s/2 .. g*W; the recording group evaluates up to e later and the
//    alert group reads it up to e after that;
//  - a rate alone needs a second sample: s, then the same two evaluations;
//  - a raw series (no recording rule): the next scrape, then one evaluation;
//  - firing: the first evaluation at least `for` after going pending.
local d = import '../lib/duration.libsonnet';
{
  alertTiming:: {
    local c = $._config,
    local s = d.seconds('scrapeInterval', c.scrapeInterval),
    local e = d.seconds('evaluationInterval', if c.ruleInterval != null then c.ruleInterval else c.evaluationInterval),
    local W = d.seconds('rateWindow', c.rateWindow),
    local gated(fraction) = { min: std.max(fraction * W - s / 2, s), nominal: std.max(fraction * W, s), max: std.max(fraction * W, s) + 2 * e },
    local second = { min: s, nominal: s, max: s + 2 * e },
    local raw = { min: 0, nominal: s, max: s + e },
    local timing(name, forKey, pending) =
      local f = d.seconds(forKey, c[forKey]);
      local firing = { min: pending.min + f, nominal: pending.nominal + f, max: pending.max + f + e };
      {
        pending: pending,
        'for': f,
        firing: firing,
        figure: '%s to %s after the condition starts (pending after %s to %s, then `for: %s`), with %s scrapes and %s evaluations'
                % [d.format(firing.min), d.format(firing.max), d.format(pending.min), d.format(pending.max),
                   c[forKey], d.format(s), d.format(e)],
      },
    NfsdtopUnfairShare: timing('NfsdtopUnfairShare', 'unfairFor', gated(c.unfairBacklogged)),
    NfsdtopClassStarved: timing('NfsdtopClassStarved', 'starvedFor', gated(c.starvedBacklogged)),
    NfsdtopQueueWaitHigh: timing('NfsdtopQueueWaitHigh', 'waitFor', second),
    NfsdtopEventsLost: timing('NfsdtopEventsLost', 'eventsLostFor', raw),
    NfsdtopAgentDown: timing('NfsdtopAgentDown', 'agentDownFor', raw),
  },
}
