# Shared by scripts/planted-bottlenecks.sh and scripts/validate-unseen.sh (sourced, not run): the analyzer's
# predicted savings from a --json report, and the measured saving of an in-process A/B log.
#
#   preds=$(preds_of "$python" report.json)   # "category=impact_ms=pct,..." per finding; n/a where not estimated
#   pred_for sync_bound "$preds"               # that category's predicted saving %, or n/a
#   ab_saving prog.ab.log                      # saving_pct of the "AB ..." line, or empty
#   has_fix "$python" prog.py                  # True unless the program declares HAS_FIX = False

# Each finding's first estimated suggestion's impact_ms, and that as a share of end_to_end_ms.
preds_of() {
  "$1" - "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e2e = r.get("end_to_end_ms")
out = []
for f in r.get("findings") or []:
    cat = f.get("category") or f.get("bottleneck_type") or "?"
    sug = next((s for s in f.get("suggestions") or [] if s.get("estimated") is not False), {})
    imp = sug.get("impact_ms")
    if not isinstance(imp, (int, float)) or imp <= 0 or not isinstance(e2e, (int, float)) or e2e <= 0:
        out.append(cat + "=n/a=n/a")
    else:
        out.append("%s=%.2f=%.1f" % (cat, imp, imp / e2e * 100))
print(",".join(out) or "-")
PY
}

pred_for() {
  tr ',' '\n' <<<"$2" | awk -F= -v c="$1" '$1 == c { print $3; found = 1; exit } END { if (!found) print "n/a" }'
}

ab_saving() {
  grep '^AB ' "$1" 2>/dev/null | tail -1 | sed -n 's/.*saving_pct=\([-0-9.]*\).*/\1/p'
}

has_fix() {
  "$1" -c 'import ast, sys
v = True
for node in ast.parse(open(sys.argv[1]).read()).body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", "") == "HAS_FIX":
        v = ast.literal_eval(node.value)
print(v)' "$2"
}
