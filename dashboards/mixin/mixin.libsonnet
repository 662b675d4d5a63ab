// The nfsdtop monitoring mixin: _config (config.libsonnet), the recording
// rules (prometheusRules), the alerts (prometheusAlerts), the Grafana
// dashboards (grafanaDashboards) and how long each alert takes to fire
// (alertTiming). render.jsonnet writes the files nfsdtop ships.
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'alerts/timing.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
