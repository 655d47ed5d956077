#!/bin/sh
# snug plan / snug profile end to end on stories260K: --json parses and its
# totals add up, --svg is well-formed XML with one bar per planned value, the
# profile file loads back through --stats with every row matched, and bad
# --mem / --shape values are clear errors.
# Usage: tests/plan/check_cli.sh SNUG_BINARY PYTHON   (from the repo root)
set -eu
SNUG=$1
PY=${2:-python3}
M=../shared/fixtures/stories260K/stories260K_kv.onnx
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

"$SNUG" plan "$M" --ctx 256 --mem host=64M --json --svg "$T/a.svg" >"$T/plan.json"
"$PY" - "$T/plan.json" "$T/a.svg" <<'PYEOF'
import json, sys, xml.dom.minidom
p = json.load(open(sys.argv[1]))
d = p["devices"][0]
assert d["total"] == d["weights"] + d["kv"] + d["activations"] + d["folded"], d
assert d["fits"] is True and d["budget"] == 64 << 20
assert d["kv"] == 10 * 4 * 256 * 8 * 4, d["kv"]          # 5 layers x K,V x [1,4,256,8] f32
assert p["layers"]["count"] == 5 and len(p["per_layer"]) == 7
assert sum(r["kv"] for r in p["per_layer"]) == d["kv"]
assert sum(r["weights"] for r in p["per_layer"]) == d["weights"]
cov = p["coverage"]
assert cov["estimator"] + cov["profile"] + cov["max"] + cov["fallback"] == len(p["nodes"])
# the plan value: arena slots inside the buffer and its activations figure, slots alive at
# one step never overlapping (an in-place output shares its input's slot), and the SVG
# drawing one bar per slot from it (a frame and a background besides)
pl = p["plan"]
buf = pl["buffers"][0]
assert buf["size"] == d["activations"] and buf["lower_bound"] <= buf["size"], buf
assert len(pl["values"]) > 0 and len(pl["nodes"]) == len(p["nodes"])
slots = {(v["offset"], v["first"], v["last"]): v["size"] for v in pl["values"] if v["storage"] == "arena"}
slots.update({(n["ws_offset"], n["group"], i): n["workspace"] for i, n in enumerate(pl["nodes"]) if n["workspace"]})
assert all(o + sz <= buf["size"] for (o, _, _), sz in slots.items())
items = sorted(slots.items())
for i, ((o1, f1, l1), s1) in enumerate(items):
    for (o2, f2, l2), s2 in items[i + 1:]:
        if o2 >= o1 + s1:
            break
        assert not (s1 and s2 and f1 <= l2 and f2 <= l1), ((o1, f1, l1, s1), (o2, f2, l2, s2))
svg = xml.dom.minidom.parse(sys.argv[2])
assert svg.documentElement.tagName == "svg"
assert len(svg.getElementsByTagName("rect")) == len(slots) + 2, (len(svg.getElementsByTagName("rect")), len(slots))
print("plan --json / --svg ok: %d slots in %d bytes" % (len(slots), buf["size"]))
PYEOF

"$SNUG" profile "$M" --ctx 8 --out "$T/stats.csv" >/dev/null
head -1 "$T/stats.csv" | grep -qx '#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations'
"$SNUG" plan "$M" --ctx 8 --stats "$T/stats.csv" >"$T/plan.txt" 2>"$T/plan.err"
grep -q ': 394 rows, 0 match no node, 0 nodes without a row' "$T/plan.txt"
"$SNUG" plan "$M" --ctx 8 --stats tests/plan/ort_stats_stories260K.csv | grep -q '0 match no node, 0 nodes without a row'
# Over budget: exit status 3.
set +e
"$SNUG" plan "$M" --ctx 256 --mem host=1M >/dev/null; rc=$?
"$SNUG" plan "$M" --mem host=12Q >/dev/null 2>"$T/e1"; rc1=$?
"$SNUG" plan "$M" --mem npu=1G >/dev/null 2>"$T/e2"; rc2=$?
"$SNUG" plan "$M" --mem gpu=1G >/dev/null 2>"$T/e6"; rc6=$?
"$SNUG" plan "$M" --shape 'input_ids:[1,0]' >/dev/null 2>"$T/e3"; rc3=$?
"$SNUG" plan "$M" --shape 'nope:[1]' >/dev/null 2>"$T/e4"; rc4=$?
printf 'x,1,2\n' >"$T/bad.csv"
"$SNUG" plan "$M" --ctx 8 --stats "$T/bad.csv" >/dev/null 2>"$T/e5"; rc5=$?
set -e
[ $rc -eq 3 ] && [ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ $rc3 -eq 2 ] && [ $rc4 -eq 2 ] && [ $rc5 -eq 1 ] && [ $rc6 -eq 1 ]
grep -q "'12Q' is not a size" "$T/e1"
grep -q "no device 'npu'" "$T/e2"
grep -q "snug.mem.gpu: this session has no accelerator" "$T/e6"
grep -q 'dimensions must be positive, got 0' "$T/e3"
grep -q "no input 'nope'" "$T/e4"
grep -q 'bad.csv:1: expected 5 comma-separated fields, got 3' "$T/e5"
echo "check_cli: ok"
