// grafanaDashboards: file name -> dashboard, as the mixin convention has
// it. UIDs are stable: links, bookmarks and provisioning rely on them.
{
  grafanaDashboards+:: {
    'nfsdtop-overview.json': (import 'overview.libsonnet')($._config),
    'nfsdtop-drilldown.json': (import 'drilldown.libsonnet')($._config),
  },
}
