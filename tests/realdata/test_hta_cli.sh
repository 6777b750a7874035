#!/usr/bin/env bash
# test_hta_cli.sh CULPRIT DATA_DIR: `culprit diagnose` on every file of hta-tests/ and
# hta-single-rank/ (Holistic Trace Analysis's test inputs, read in place), each against the
# outcome in the table below: the profiler traces are read (the iterations of the report's
# window, and the warning when a rank or the steps had to be guessed), the two files that are
# not profiler traces are refused by name. A file of those folders missing from the table, or
# a table line without its file, fails the test.
set -uo pipefail
culprit=$1
data=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -d "$data/hta-tests" ] && [ -d "$data/hta-single-rank" ] || fail "the real data directory $data is missing (tests/data)"
command -v jq >/dev/null || fail "jq is needed"
tmp=$(mktemp -d "${CULPRIT_TEST_TMP:-/tmp}/hta-cli.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# file | exit | window iterations (exit 0) or the refusal (exit 2) | a warning expected on stderr ("-": none)
table=$(cat <<'EOF'
hta-tests/amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz|0|1-2|-
hta-tests/cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz|0|551-551|-
hta-tests/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz|0|0-0|no ProfilerStep#N annotation: the whole trace
hta-tests/critical_path__cuda_event_sync__event_sync_trace.json.gz|0|100-100|incomplete distributedInfo (rank 0, no world_size): read as rank 0 of 1
hta-tests/critical_path__simple_add__benchmark_result_493459_1694039959_trace.json.gz|0|0-0|incomplete distributedInfo (rank 0, no world_size)
hta-tests/cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz|0|0-0|no ProfilerStep#N annotation
hta-tests/distributed_info_unavailable__distributed_info_not_found.json.gz|0|1009-1009|-
hta-tests/execution_trace__benchmark_simple_add_et.json.gz|2|a PyTorch execution trace, not a profiler trace|-
hta-tests/execution_trace__benchmark_simple_add_trace.json.gz|0|0-0|no ProfilerStep#N annotation
hta-tests/memory_analysis__memory_timeline.raw.gz|2|a memory-profiler timeline|-
hta-tests/mixed_files__rank_non_gpu.json.gz|0|1009-1009|incomplete distributedInfo (rank 0, no world_size)
hta-tests/mtia_inference_trace__mtia_inference_rank_0.json.gz|0|0-0|no ProfilerStep#N annotation
hta-tests/mtia_trace_single_rank__mtia_rank_0.json.gz|0|1-1|-
hta-tests/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz|0|101-105|-
hta-tests/trace_file_list__inference_rank_1.json.gz|0|0-0|incomplete distributedInfo (rank 1, no world_size): read as rank 0 of 1
hta-tests/triton_example__triton_example.json.gz|0|1-1|-
hta-single-rank/df_index_resolver__rank1of2_V100.json.gz|0|2-6|-
hta-single-rank/nccl_parser_config__rank0of2_A100_ddp.json.gz|0|4-6|-
hta-single-rank/negative_queue_length__rank0of16_A100.json.gz|0|550-554|-
hta-single-rank/sampled_rank-0.json.gz|0|551-552|-
hta-single-rank/sampled_rank-1.json.gz|0|551-552|-
hta-single-rank/trace_diff_control__rank3of8_A100.json.gz|0|1009-1014|-
hta-single-rank/trace_diff_test__rank1of2_V100.json.gz|0|1009-1014|-
EOF
)

# the table covers the folders exactly
(cd "$data" && ls hta-tests hta-single-rank | awk '/:$/ {d = substr($0, 1, length($0) - 1); next}
	NF && $0 != "LICENSE" {print d "/" $0}' | sort) >"$tmp/files"
cut -d'|' -f1 <<<"$table" | sort >"$tmp/listed"
diff "$tmp/listed" "$tmp/files" >"$tmp/diff" || fail "the table and the folders differ (< table only, > folder only): $(cat "$tmp/diff")"

n=0
while IFS='|' read -r file want what warning; do
	f=$data/$file out=$tmp/out err=$tmp/err
	"$culprit" diagnose "$f" >"$out" 2>"$err"
	rc=$?
	[ $rc -eq "$want" ] || fail "$file: exit $rc, expected $want: $(cat "$err")"
	if [ "$want" -eq 2 ]; then
		grep -qF "$file: $what" "$err" || fail "$file: refusal \"$(cat "$err")\", expected \"$what\""
		grep -q "malformed JSON" "$err" && fail "$file: well-formed JSON called malformed"
	else
		got=$(jq -r '"\(.window.first_iter)-\(.window.last_iter)"' "$out") || fail "$file: the report is not JSON"
		[ "$got" = "$what" ] || fail "$file: window $got, expected $what"
		# one or a few steps: diagnosed as far as they go, no baseline said plainly, no NaN
		jq -e '.window.baseline_iter_ms != null or (.verdict.summary | test("no baseline"))' "$out" >/dev/null ||
			fail "$file: no baseline and the summary does not say so: $(jq -c .verdict "$out")"
		"$culprit" diagnose --text "$f" >"$tmp/text" 2>/dev/null || fail "$file: --text exit $?"
		grep -qiw 'nan' "$out" "$tmp/text" && fail "$file: nan in the report"
		if [ "$warning" = "-" ]; then
			[ -s "$err" ] && fail "$file: unexpected warning: $(cat "$err")"
		else
			grep -qF "warning: $f: $warning" "$err" || fail "$file: warning \"$(cat "$err")\", expected \"$warning\""
			[ "$(grep -c 'distributedInfo' "$err")" -le 1 ] || fail "$file: more than one distributedInfo warning"
		fi
	fi
	n=$((n + 1))
done <<<"$table"
echo "ok: $n files"
