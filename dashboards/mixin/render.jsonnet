// What nfsdtop ships, from the mixin: `rules` (the recording and alerting
// rules, one file's worth, with `header` for its comment), `dashboards`
// (file name -> Grafana dashboard) and `timing` (alertTiming). Values, not
// text: jsonnet 0.18's std.manifest* take seconds on this much, so
// generate.py writes them (JSON; YAML for the rules). Top-level arguments: config, the
// _config overrides (an object); note, where they came from (for the
// rules file's header). dashboards/tools/generate.py is the usual caller.
local validate = import 'lib/validate.libsonnet';
local base = import 'mixin.libsonnet';
local text = import 'lib/text.libsonnet';
// Every expression ends in a newline: generate.py writes it as a YAML block.
local blocks(groups) = [g { rules: [r { expr: std.rstripChars(r.expr, '\n') + '\n' } for r in g.rules] } for g in groups];

function(config={}, note='the defaults')
  // A local, so that the checks run once (jsonnet re-evaluates a field
  // expression on every access; a local is evaluated once).
  local checked = validate.check(base._config, config);
  local mixin = base { _config+:: checked };
  local c = mixin._config;
  {
    header: [
      'GENERATED from dashboards/mixin (prometheusRules + prometheusAlerts)',
      'with %s. Do not edit: change _config and regenerate' % note,
      '(python3 dashboards/tools/generate.py rules). Parameters:',
    ] + ['  %s=%s' % [k, if std.isNumber(c[k]) then text.number(c[k]) else if std.isString(c[k]) then c[k] else std.manifestJsonEx(c[k], '')] for k in std.objectFields(c)],
    rules: { groups: blocks(mixin.prometheusRules.groups + mixin.prometheusAlerts.groups) },
    dashboards: mixin.grafanaDashboards,
    timing: mixin.alertTiming,
  }
