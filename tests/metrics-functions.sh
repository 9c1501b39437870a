# Prometheus text from a /metrics endpoint in the tests. Source after
# functions.sh.

# parse_metrics FILE: check FILE is Prometheus text format 0.0.4 (TYPE before
# samples, once a family; counter, gauge or histogram; well-formed samples)
# and print {"name{labels}": value} as JSON.
parse_metrics () {
  python3 - "$1" <<'EOF2'
import json, re, sys
typ, out = {}, {}
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)?\})? (-?[0-9.]+(?:[eE][+-]?[0-9]+)?|[+-]Inf|NaN)$')
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# HELP "):
        continue
    if line.startswith("# TYPE "):
        _, _, name, t = line.split(" ")
        assert t in ("counter", "gauge", "histogram"), line
        assert name not in typ, "TYPE twice: " + line
        typ[name] = t
        continue
    m = sample.match(line)
    assert m, "not Prometheus text: %r" % line
    name = m.group(1)
    base = re.sub(r'_(bucket|sum|count)$', '', name) if name not in typ else name
    assert base in typ, "sample before its TYPE: " + line
    out[name + (m.group(2) or "")] = float(m.group(7))
print(json.dumps(out))
EOF2
}

# metric_val JSONFILE SERIES: the series' value (0 if absent), as an integer
metric_val () { python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1])).get(sys.argv[2], 0)))' "$1" "$2"; }
