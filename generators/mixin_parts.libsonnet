// Inlined by generators/jsonnet_mixin.py into mixin/mixin.libsonnet (which must stand alone when vendored).
// It reads `shipped`, `refused`, `whole`, `reservedLabels` and `refusedWhy`, defined before it.

// Python's `number()` (repr of a float, shortest round trip) in jsonnet: std.toString prints 17 digits.
local pow10(k) = std.pow(10, k);
local scaled(a, k) = if k >= 0 then a / pow10(k) else a * pow10(-k);
local stripZeros(d) = if std.length(d) > 1 && d[std.length(d) - 1] == '0' then stripZeros(std.substr(d, 0, std.length(d) - 1)) else d;
local python(d, e) =
  local n = std.length(d);
  if e >= -4 && e < 16 then
    if e >= 0 then
      if n <= e + 1 then d + std.join('', std.makeArray(e + 1 - n, function(_) '0'))
      else std.substr(d, 0, e + 1) + '.' + std.substr(d, e + 1, n - e - 1)
    else '0.' + std.join('', std.makeArray(-e - 1, function(_) '0')) + d
  else
    (if n > 1 then d[0] + '.' + std.substr(d, 1, n - 1) else d)
    + 'e' + (if e < 0 then '-' else '+') + (if std.abs(e) < 10 then '0' else '') + std.toString(std.abs(e));
local shortest(a, p) =
  local e0 = std.floor(std.log(a) / std.log(10));
  local e = if pow10(e0) > a then e0 - 1 else if pow10(e0 + 1) <= a then e0 + 1 else e0;
  local raw = std.toString(std.floor(scaled(a, e - p + 1) + 0.5));
  local ee = if std.length(raw) > p then e + 1 else e;
  local d = stripZeros(raw);
  local sci = (if std.length(d) > 1 then d[0] + '.' + std.substr(d, 1, std.length(d) - 1) else d) + 'e' + std.toString(ee);
  if p >= 17 || std.parseJson(sci) == a then python(d, ee) else shortest(a, p + 1);
local number(x) =
  if std.floor(x) == x then std.toString(x)
  else (if x < 0 then '-' else '') + shortest(std.abs(x), 1);
local fmt(v) = if std.isString(v) then v else number(v);

// The checks of a site's _config; each problem names its key by dotted path.
local dotted(path) = std.join('.', path);
// null where the tree has no such key (memory.page_io_per_second has no `for` as shipped).
local get(o, path) = std.foldl(function(acc, k) if std.isObject(acc) && std.objectHas(acc, k) then acc[k] else null, path, o);
local refusedNames = [dotted(p) for p in refused];
local isWhole(path) = std.member(whole, dotted(path));
local shape(path, def, v) =
  if std.isObject(def) && !isWhole(path) then
    if !std.isObject(v) then [dotted(path) + ': expected a mapping, got ' + std.type(v)]
    else
      [dotted(path + [k]) + ': unknown key (misspelt, or not a setting of this mixin)' for k in std.objectFields(v)
         if !std.objectHas(def, k) && !std.member(refusedNames, dotted(path + [k]))]
      + [dotted(path + [k]) + ': missing (merge with `+:`, do not replace the section)' for k in std.objectFields(def) if !std.objectHas(v, k)]
      + std.flattenArrays([shape(path + [k], def[k], v[k]) for k in std.objectFields(def) if std.objectHas(v, k)])
  else if std.type(def) != std.type(v) then [dotted(path) + ': expected a ' + std.type(def) + ', got ' + std.type(v)]
  else [];
local labelProblems(labels) =
  [('alert_labels.' + k + ': set by the rules themselves; pick another label name') for k in std.objectFields(labels) if std.member(reservedLabels, k)]
  + [('alert_labels.' + k + ': expected a string') for k in std.objectFields(labels) if !std.isString(labels[k])];
local problems(c) =
  local structural = shape([], shipped, c);
  if std.length(structural) > 0 then structural
  else [dotted(p) + ': ' + refusedWhy for p in refused if get(c, p) != get(shipped, p)] + labelProblems(c.alert_labels)
    // The alerts' runbook_url strips a trailing / (spec.runbook), the dashboards' Runbooks link keeps it:
    // two forms of one value, which a hole cannot give.
    + (if std.rstripChars(c.runbook_base_url, '/') != c.runbook_base_url
       then ['runbook_base_url: end it without a /, or use `make mixin` (docs/mixin.md)'] else []);

// generators/mixin_probe.py's `pinned`, which classify() checks against Python's dashboards.
local dsRef = { type: 'prometheus', uid: '${datasource}' };
local pin(node, uid) =
  if std.isObject(node) then
    if node == dsRef then { type: 'prometheus', uid: uid }
    else
      local out = { [k]: pin(node[k], uid) for k in std.objectFields(node) };
      if std.objectHas(node, 'templating') && std.isObject(node.templating) then
        out + { templating+: { list: [v for v in out.templating.list if !(std.objectHas(v, 'type') && v.type == 'datasource')] } }
      else out
  else if std.isArray(node) then [pin(v, uid) for v in node]
  else if std.isString(node) then std.strReplace(node, 'var-datasource=${datasource}&', '')
  else node;
local pinned(board, uid) = if uid == '' then board else pin(board, uid);
