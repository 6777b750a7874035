#!/usr/bin/env bash
# docs/grafana/render.sh: PNG pictures of the dashboards' panels for docs/deep-dive.md,
# drawn by gnuplot from the panels' own SQL (read out of dashboards/*.json, Grafana's
# variables and macros replaced as Grafana would) on a database culpritd filled. They are
# not screenshots of Grafana.
#
#   docs/grafana/render.sh DSN [JOB [PHASE [NODE]]]     (default sim-case5 mlp <hottest node>)
#
# DSN: a case5 database, e.g. the one test_grafana_dashboards leaves on the test cluster:
#   tests/pg.sh start /tmp/pg     # prints host=/tmp/pg/sock user=culprit dbname=postgres
#   CULPRIT_TEST_DSN=... CULPRIT_SOURCE_DIR=$PWD ctest --test-dir build/test -R test_grafana
#   docs/grafana/render.sh "host=/tmp/pg/sock user=culprit dbname=culprit_grafana"
# Needs psql, jq, perl and gnuplot (Debian: postgresql-client jq gnuplot-nox). Writes
# docs/grafana/img/*.png and prints the suspects table as Markdown.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dsn=${1:?usage: render.sh DSN [JOB [PHASE [NODE]]]}
job=${2:-sim-case5}
phase=${3:-mlp}
node=${4:-}
topk=16
out=$here/img
for t in psql jq perl gnuplot; do
	command -v $t >/dev/null || { echo "render.sh: $t is missing" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

q() { psql "$dsn" -X -q -v ON_ERROR_STOP=1 -At -F $'\t' -c "$1"; }

# The time range: the job's iterations, a minute before and three after, as Grafana's
# ISO strings; $__interval when the panel sets none: a tenth of the range, at least 30s.
IFS=$'\t' read -r from to ival < <(q "
	SELECT to_char((min(time) - interval '1 minute') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
	       to_char((max(time) + interval '3 minutes') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
	       greatest(30, ceil(extract(epoch FROM max(time) - min(time)) / 10 / 30) * 30)::int || 's'
	FROM culprit_iteration_time WHERE job = '$(printf %s "$job" | sed "s/'/''/g")'")
[ -n "$from" ] || { echo "render.sh: no iterations of job \"$job\" in the database" >&2; exit 1; }
if [ -z "$node" ]; then
	node=$(q "SELECT node FROM culprit_phase_durations WHERE time BETWEEN '$from' AND '$to'
	          AND job = '$job' AND phase = '$phase' GROUP BY node ORDER BY max(dur_ms) DESC LIMIT 1")
fi
echo "render.sh: $job, $phase, node $node, $from .. $to" >&2

# sql UID KIND ID: the query of a panel (KIND panel, ID its id), annotation (anno, name) or
# variable (var, name) of dashboard UID, interpolated.
sql() {
	local file raw pint
	file=$(grep -l "\"uid\": \"$1\"" "$here"/dashboards/*.json | head -n 1)
	case $2 in
	panel) raw=$(jq -r --argjson id "$3" '.panels[] | select(.id == $id) | .targets[0].rawSql' "$file")
	       pint=$(jq -r --argjson id "$3" '.panels[] | select(.id == $id) | .interval // empty' "$file") ;;
	anno)  raw=$(jq -r --arg n "$3" '.annotations.list[] | select(.name == $n) | .target.rawSql' "$file") ;;
	var)   raw=$(jq -r --arg n "$3" '.templating.list[] | select(.name == $n) | .query' "$file") ;;
	esac
	[ -n "$raw" ] && [ "$raw" != null ] || { echo "render.sh: no $2 $3 in $1" >&2; exit 1; }
	JOB=$job PHASE=$phase NODE=$node TOPK=$topk FROM=$from TO=$to IVAL=${pint:-$ival} perl -0pe '
		sub secs { my ($v, $u) = $_[0] =~ /^\s*([\d.]+)\s*(ms|s|m|h|d)\s*$/ or die "bad interval $_[0]\n";
		           return $v * {ms => 0.001, s => 1, m => 60, h => 3600, d => 86400}->{$u}; }
		sub lit { (my $v = $_[0]) =~ s/\x27/\x27\x27/g; $v }
		s/\$\{?__interval_ms\}?/secs($ENV{IVAL}) * 1000/ge;
		s/\$\{?__interval\b\}?/$ENV{IVAL}/g;
		s/\$\{?(job|phase|node|topk)\}?/lit($ENV{uc $1})/ge;
		s/\$__timeFilter\(([^)]*)\)/$1 BETWEEN \x27$ENV{FROM}\x27 AND \x27$ENV{TO}\x27/g;
		s/\$__timeFrom\(\)/\x27$ENV{FROM}\x27/g;
		s/\$__timeTo\(\)/\x27$ENV{TO}\x27/g;
		s/\$__timeGroupAlias\(([^,]*),\s*\x27?([^)\x27]*)\x27?\)/"floor(extract(epoch from $1)\/".secs($2).")*".secs($2)." AS \"time\""/ge;
		s/\$__timeGroup\(([^,]*),\s*\x27?([^)\x27]*)\x27?\)/"floor(extract(epoch from $1)\/".secs($2).")*".secs($2)/ge;
		die "render.sh: unknown macro or variable: $&\n" if /\$\w+/;
	' <<<"$raw"
}

# Long format (time, metric, value) -> rows "t y value" with y the metric's order of first
# appearance, and "ytics" for gnuplot. The query's order puts the hottest first.
reshape() {
	awk -F'\t' -v ticsfile="$2" '
		{ if (!($2 in y)) { y[$2] = n++; name[n - 1] = $2 }
		  print $1, y[$2], $3 }
		END { s = ""; for (i = 0; i < n; i++) s = s sprintf("%s\"%s\" %d", i ? ", " : "", name[i], i);
		      print "set ytics (" s ")" > ticsfile }' "$1"
}

epoch() { q "SELECT extract(epoch FROM timestamptz '$1')::bigint"; }
t0=$(epoch "$from")
t1=$(epoch "$to")

common="set terminal pngcairo size 900,%H% font 'DejaVu Sans,9'
set xdata time; set timefmt '%s'; set format x '%H:%M'; set xrange ['$t0':'$t1']
set xlabel 'time (UTC)'"

# heatmap NAME UID ID TITLE HEIGHT
heatmap() {
	local data=$tmp/$1.tsv bucket
	q "$(sql "$2" panel "$3")" >"$data"
	reshape "$data" "$tmp/$1.tics" >"$tmp/$1.dat"
	bucket=$(jq -r --argjson id "$3" '.panels[] | select(.id == $id) | .interval // empty' \
		"$(grep -l "\"uid\": \"$2\"" "$here"/dashboards/*.json)")
	bucket=$(perl -e '($v,$u)=$ARGV[0]=~/([\d.]+)(ms|s|m|h|d)/; print $v*{ms=>0.001,s=>1,m=>60,h=>3600,d=>86400}->{$u}' "${bucket:-$ival}")
	gnuplot <<-EOF
		${common//%H%/$5}
		set output '$out/$1.png'
		set title "$4" noenhanced
		load '$tmp/$1.tics'
		set yrange [-0.5:*] reverse
		set ytics nomirror noenhanced
		set cbrange [0:*]; set cblabel 'max ms'
		set palette defined (0 '#fff5eb', 0.3 '#fdae6b', 0.7 '#e6550d', 1 '#7f2704')
		unset key
		plot '$tmp/$1.dat' using (\$1 + $bucket / 2):2:($bucket / 2):(0.5):3 with boxxy fs solid 1.0 noborder fc palette
	EOF
}

heatmap heatmap_nodes culprit-phases 1 "$phase: slowest rank per node, top $topk nodes and the median node ($job)" 420
heatmap heatmap_ranks culprit-phases 2 "$phase: ranks of $node (drill-down)" 260
heatmap heatmap_stages culprit-phases 3 "$phase: slowest rank per pipeline stage" 280

# Iteration time with the incident (region) and the out-of-band events (lines) as Grafana
# draws its annotations.
q "$(sql culprit-job panel 1 | perl -pe 's/^SELECT time,/SELECT extract(epoch from time)::float8,/')" >"$tmp/iter.tsv"
q "SELECT extract(epoch FROM time), extract(epoch FROM timeend) FROM ($(sql culprit-job anno 'culprit incidents')) a" >"$tmp/inc.tsv"
q "SELECT extract(epoch FROM time), replace(text, '\"', '') FROM ($(sql culprit-job anno 'out-of-band events')) e" >"$tmp/ev.tsv"
{
	awk -F'\t' '{ printf "set object %d rect from \"%d\", graph 0 to \"%d\", graph 1 fc rgb \"#e34a33\" fs transparent solid 0.12 noborder behind\n", NR, $1, $2 }' "$tmp/inc.tsv"
	awk -F'\t' '{ printf "set arrow %d from \"%d\", graph 0 to \"%d\", graph 1 nohead lc rgb \"#fd8d3c\" dt 2 lw 2\n", NR, $1, $1;
	              printf "set label %d \"%s\" at \"%d\", graph 0.95 offset 0.5,0 font \",8\" noenhanced\n", NR, substr($2, 1, 60), $1 }' "$tmp/ev.tsv"
} >"$tmp/anno.gp"
gnuplot <<-EOF
	${common//%H%/300}
	set output '$out/iteration_time.png'
	set title "Iteration time of $job: slowest and median rank; shaded: incident; dashed: out-of-band event" noenhanced
	set ylabel 'ms'; set yrange [0:*]
	set key bottom right
	load '$tmp/anno.gp'
	set datafile separator '\t'
	plot '$tmp/iter.tsv' using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#d7301f' title 'slowest rank', \
	     '' using 1:3 with linespoints lw 2 pt 7 ps 0.6 lc rgb '#3182bd' title 'median rank'
EOF

# The top suspects table, as Markdown.
q "SELECT rank, node, role, level, phase, ratio, z, score FROM ($(sql culprit-job panel 2)) s" |
	awk -F'\t' 'BEGIN { print "| rank | node | role | level | phase | ratio | z | score |"; print "|---|---|---|---|---|---|---|---|" }
	            { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
ls -l "$out"/*.png >&2
