// Test-sized windows for scripts/e2e/30-alerts-live.sh and
// 31-unfair-many.sh: Prometheus scrapes the demo daemons every second, so a
// 10s window holds ten samples and alerts go pending within seconds.
// Thresholds stay the shipped ones: the live tests check the same
// decisions, only faster. Not for production: 10s windows are noise.
{
  rateWindow: '10s',
  ruleInterval: '1s',
  scrapeInterval: '1s',
  unfairFor: '5s',
  starvedFor: '5s',
  waitFor: '5s',
  eventsLostFor: '5s',
  agentDownFor: '5s',
}
