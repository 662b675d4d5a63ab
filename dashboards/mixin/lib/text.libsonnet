// Numbers as PromQL and people write them (0.5, not 0.50000000000000000).
{
  // %g fails on 0 in jsonnet 0.18, and keeps 5 digits of 0.131072 only.
  number(x):: if x == std.floor(x) then '%d' % x else '%.12g' % x,
}
