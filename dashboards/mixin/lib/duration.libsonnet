// Prometheus durations ("1h30m", "15s", "500ms") to seconds and back, for
// the "fires after" figures; a malformed one stops evaluation with a
// message naming it.
local units = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400, w: 604800, y: 31536000 };
local digits = std.set(std.stringChars('0123456789'));
local isDigit(c) = std.setMember(c, digits);

{
  // seconds('2m30s') == 150
  seconds(name, d)::
    assert std.isString(d) && std.length(d) > 0 : '%s: expected a duration such as 5m, got %s' % [name, std.manifestJson(d)];
    local chars = std.stringChars(d);
    local n = std.length(chars);
    local step(i, acc) =
      if i >= n then acc
      else
        local numEnd = std.foldl(function(j, k) if j == k && k < n && isDigit(chars[k]) then k + 1 else j, std.range(i, n - 1), i);
        local unit = if numEnd + 1 < n && chars[numEnd] == 'm' && chars[numEnd + 1] == 's' then 'ms'
        else if numEnd < n then chars[numEnd] else '';
        assert numEnd > i && std.objectHas(units, unit) : '%s: %s is not a duration (digits and a unit: ms s m h d w y, e.g. 5m or 1h30m)' % [name, std.manifestJson(d)];
        step(numEnd + std.length(unit), acc + std.parseInt(d[i:numEnd]) * units[unit]);
    step(0, 0),

  // format(150) == '2m30s'
  format(s)::
    local whole = std.floor(s);
    local ms = std.floor((s - whole) * 1000 + 0.5);
    local h = std.floor(whole / 3600), m = std.floor((whole % 3600) / 60), sec = whole % 60;
    local parts = (if h > 0 then ['%dh' % h] else [])
                  + (if m > 0 then ['%dm' % m] else [])
                  + (if sec > 0 || ms > 0 then [if ms > 0 then '%d.%ds' % [sec, ms / 100] else '%ds' % sec] else []);
    if parts == [] then '0s' else std.join('', parts),
}
