#!/usr/bin/env bash
# test_cli_case5.sh CULPRIT: the seed incident through the CLI contract: `culprit sim
# --scenario case5 --out` then `culprit diagnose`: compute degradation, exactly ranks
# 10352-10359 on node-1294 as culprits, no other rank at DP=256-287 a culprit, the
# port_down event contradicted.
set -euo pipefail
culprit=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; jq -c '{window, verdict, events}' "$dir/r.json" >&2 || true; exit 1; }

"$culprit" sim --scenario case5 --iters 12 --seed 11 --out "$dir/case5.jsonl.gz"
"$culprit" diagnose "$dir/case5.jsonl.gz" >"$dir/r.json"
jq -e '.verdict.category == "compute_degradation"' "$dir/r.json" >/dev/null || fail "category"
jq -e '[.suspects[] | select(.role == "culprit") | .rank] | sort == [10352,10353,10354,10355,10356,10357,10358,10359]' "$dir/r.json" >/dev/null || fail "culprit set"
jq -e '[.suspects[] | select(.role == "culprit") | .host] | unique == ["node-1294"]' "$dir/r.json" >/dev/null || fail "culprit host"
jq -e '[.suspects[] | select(.role == "culprit") | .coords | select(.pp != 7 or .dp < 272 or .dp > 279)] == []' "$dir/r.json" >/dev/null || fail "culprit coordinates"
jq -e '[.suspects[] | select(.coords.dp >= 256 and .coords.dp < 288 and .host != "node-1294" and .role == "culprit")] == []' "$dir/r.json" >/dev/null || fail "a DP=256-287 rank outside node-1294 named culprit"
jq -e '.culprits_total == 8' "$dir/r.json" >/dev/null || fail "culprits_total"
jq -e '[.suspects[0].evidence[0].phase, .suspects[0].evidence[0].kind] == ["mlp", "compute"]' "$dir/r.json" >/dev/null || fail "evidence"
jq -e '.suspects[0].evidence[0].ratio > 5 and .suspects[0].evidence[0].ratio < 6.5' "$dir/r.json" >/dev/null || fail "ratio"
jq -e '.events == [.events[0]] and .events[0].host == "node-1294" and .events[0].kind == "port_down" and .events[0].verdict == "contradicted"' "$dir/r.json" >/dev/null || fail "event verdict"
jq -e '.late_arrivers.ranks == 280 and .late_arrivers.consistent_with_culprits' "$dir/r.json" >/dev/null || fail "late arrivers"
jq -e '.window.baseline_iter_ms > 28000 and .window.baseline_iter_ms < 32000 and .window.window_iter_ms > 88000' "$dir/r.json" >/dev/null || fail "window"
jq -e '.lost_ms_per_iter > 55000 and .lost_ms_per_iter < 65000' "$dir/r.json" >/dev/null || fail "lost_ms_per_iter"
# what on-call does: drain node-1294 (its 8 ranks), not repair its port, with the gain
jq -e '.findings[0].actions[0] | .kind == "drain_node" and .target == "node-1294" and .ranks == [10352,10353,10354,10355,10356,10357,10358,10359] and .expected_gain_ms_per_iter > 55000' "$dir/r.json" >/dev/null || fail "drain action"
jq -e '[.findings[0].actions[] | select(.kind == "avoid" and .target == "node-1294" and (.text | test("port_down on node-1294.*communication kernels run at 0\\.[0-9]+x")))] | length == 1' "$dir/r.json" >/dev/null || fail "avoid action"
"$culprit" diagnose --text "$dir/case5.jsonl.gz" >"$dir/r.txt"
grep -q '^  action: drain node-1294 .*ranks 10352-10359' "$dir/r.txt" || fail "text action line"
grep -q '^  not this: do not repair what the port_down on node-1294' "$dir/r.txt" || fail "text avoid line"
echo ok
