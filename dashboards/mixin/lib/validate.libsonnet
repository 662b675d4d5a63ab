// Checks a _config before anything is rendered from it, so a typo cannot
// produce rules that load but never fire: each value's kind by its name
// (duration, fraction, number, severity), the ratios' order, and that an
// override names a known parameter.
local d = import 'duration.libsonnet';
local fractions = ['unfairRatio', 'unfairBacklogged', 'starvedRatio', 'starvedBacklogged'];
local strings = ['nfsdtopSelector', 'runbookBaseUrl'];
local isDuration(k) = std.endsWith(k, 'For') || std.member(['rateWindow', 'scrapeInterval', 'evaluationInterval'], k);
local lower = std.set(std.stringChars('abcdefghijklmnopqrstuvwxyz0123456789_-'));

{
  // overrides: what the caller changes; base: the mixin's _config.
  check(base, overrides)::
    local unknown = [k for k in std.objectFields(overrides) if !std.objectHas(base, k)];
    assert unknown == [] : 'unknown parameter%s %s (the parameters are the fields of _config in dashboards/mixin/config.libsonnet)' % [if std.length(unknown) > 1 then 's' else '', std.join(', ', unknown)];
    local c = base + overrides;
    local bad(k) =
      local v = c[k];
      if isDuration(k) then (d.seconds(k, v) <= 0)
      else if k == 'ruleInterval' then (v != null && d.seconds(k, v) <= 0)
      else if std.endsWith(k, 'Severity') then !(std.isString(v) && std.length(v) > 0 && [ch for ch in std.stringChars(v) if !std.setMember(ch, lower)] == [])
      else if std.member(strings, k) then !(std.isString(v) && std.length(v) > 0 && std.length(std.findSubstr(' ', v)) == 0 && (k != 'runbookBaseUrl' || std.length(std.findSubstr('#', v)) == 0))
      else !std.isNumber(v) || v < 0 || (std.member(fractions, k) && v > 1);
    local wrong = [k for k in std.objectFields(c) if bad(k)];
    assert wrong == [] : 'parameter %s=%s is not valid for its kind (durations like 5m, fractions within 0..1, numbers >= 0, severities in lower case, no spaces)' % [wrong[0], std.manifestJson(c[wrong[0]])];
    assert c.starvedRatio < c.unfairRatio : 'starvedRatio (%g) must be below unfairRatio (%g): starvation is the extreme of unfairness' % [c.starvedRatio, c.unfairRatio];
    c,
}
