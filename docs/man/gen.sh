#!/bin/sh
# docs/man/gen.sh BUILD_DIR [OUT_DIR]: writes the man pages culpritd(8), culpritd.conf(5) and
# culprit(1) from what the programs say of themselves: `culpritd --help`, the settings table
# (`culpritd --config-doc`) and each `culprit` command's --help. OUT_DIR defaults to the
# directory of this script (the committed pages; test_man_pages checks they are current).
set -eu
build=$1
out=${2:-$(dirname "$0")}
culpritd=$build/server/culpritd
culprit=$build/client/culprit
version=$("$culpritd" --version | sed 's/^culpritd \([^ ]*\).*/\1/')

p() { printf '%s\n' "$*"; }

# A program's --help as roff, filled to the reader's width: "usage:" lines (and the lines
# indented under them) a paragraph each, "  NAME ARG   what it does" lines (an option, a
# command or a setting) tagged paragraphs, a deeper-indented line continuing the one above,
# other lines text. usage=skip drops the usage lines, usage=only keeps only them.
help2roff() {
	awk -v usage="${1:-keep}" '
	function esc(s) {
		gsub(/\\/, "\\e", s)
		gsub(/-/, "\\-", s)
		if (s ~ /^[.'"'"']/)
			s = "\\&" s
		return s
	}
	function term(t,   w) {
		w = t; sub(/ .*/, "", w); sub(/^[^ ]* ?/, "", t)
		return "\\fB" esc(w) "\\fR" (t != "" ? " \\fI" esc(t) "\\fR" : "")
	}
	/^usage: / { sub(/^usage: /, ""); inusage = 1; initem = 0; if (usage != "skip") printf ".PP\n%s\n", esc($0); next }
	inusage && /^ +[[(]/ { sub(/^ +/, ""); if (usage != "skip") print esc($0); next }
	{ inusage = 0 }
	usage == "only" { next }
	/^$/ { print ".PP"; initem = 0; next }
	/^  [^ ]/ {
		line = substr($0, 3)
		if (match(line, /  +/)) { t = substr(line, 1, RSTART - 1); d = substr(line, RSTART + RLENGTH) }
		else { t = line; sub(/ .*/, "", t); d = substr(line, length(t) + 2) }
		printf ".TP\n%s\n%s\n", term(t), esc(d); initem = 1; next
	}
	/^   / && initem { sub(/^ +/, ""); print esc($0); next }
	{ if (initem) print ".PP"; initem = 0; sub(/^ +/, ""); print esc($0) }
	'
}

{
	p ".TH CULPRITD 8 \"\" \"culprit $version\" \"System Administration\""
	p ".nh"
	p ".ad l"
	p ".SH NAME"
	p "culpritd \\- diagnosis server for distributed training: names the ranks that slow a job"
	p ".SH SYNOPSIS"
	p ".B culpritd"
	p "[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-t\\fR] [\\fB\\-\\-\\fISETTING VALUE\\fR ...]"
	p ".SH DESCRIPTION"
	p "culpritd takes the phase and kernel timings that agents stream from every rank of a"
	p "training job, finds the iterations that slowed, names the few ranks that cause it and"
	p "the kind of fault, stores records and reports in PostgreSQL (its own embedded cluster"
	p "unless \\fBdb\\fR names one), alerts on-call and answers a REST API, which also serves"
	p "the web console. Every setting can be given in the configuration file or on the command"
	p "line (\\fB\\-\\-name value\\fR, underscores written as dashes, after the file); see"
	p ".BR culpritd.conf (5)."
	p ".SH OPTIONS"
	"$culpritd" --help | help2roff skip
	p ".SH SIGNALS"
	p ".TP"
	p ".B SIGHUP"
	p "re-read the configuration file; reloadable settings take effect, a file with an error keeps the old configuration."
	p ".TP"
	p ".BR SIGTERM \", \" SIGINT"
	p "stop accepting, commit what agents sent, send their acknowledgements, stop the embedded PostgreSQL and exit (30 s at most); a second signal exits at once."
	p ".SH EXIT STATUS"
	p "0 after a clean stop, or when \\fB\\-t\\fR finds the configuration valid;"
	p "1 when culpritd could not start or run (the log says why: its database, a port in use);"
	p "2 when the configuration or the command line is not valid (the message names the setting)."
	p ".SH FILES"
	p ".TP"
	p ".I /etc/culprit/culpritd.conf"
	p "the configuration file of the systemd unit (\\fB\\-\\-config\\fR)."
	p ".TP"
	p ".I data_dir/pg"
	p "the embedded PostgreSQL cluster and its socket (\\fBdata_dir\\fR is ./var by default)."
	p ".SH EXAMPLES"
	p "Check a configuration, then run with it:"
	p ".PP"
	p ".nf"
	p ".RS"
	p "culpritd \\-t \\-\\-config /etc/culprit/culpritd.conf"
	p "culpritd \\-\\-config /etc/culprit/culpritd.conf"
	p ".RE"
	p ".fi"
	p ".PP"
	p "On one machine, its own PostgreSQL in ./var, agents and the REST API on loopback:"
	p ".PP"
	p ".nf"
	p ".RS"
	p "culpritd \\-\\-agent\\-listen 127.0.0.1:7433 \\e"
	p "    \\-\\-http\\-listen 127.0.0.1:7434"
	p "curl http://127.0.0.1:7434/api/v1/jobs"
	p ".RE"
	p ".fi"
	p ".SH SEE ALSO"
	p ".BR culpritd.conf (5),"
	p ".BR culprit (1);"
	p "docs/operations.md, docs/api.md and docs/protocol.md in the source tree."
} >"$out/culpritd.8"

{
	p ".TH CULPRITD.CONF 5 \"\" \"culprit $version\" \"File Formats\""
	p ".SH NAME"
	p "culpritd.conf \\- configuration of culpritd"
	p ".SH DESCRIPTION"
	p "Lines \\fIname\\fR = \\fIvalue\\fR; # starts a comment. The same settings are flags of"
	p ".BR culpritd (8)"
	p "(\\fB\\-\\-name value\\fR, underscores written as dashes), which override the file."
	p "Integers accept the suffixes k, M and G (powers of 1024). SIGHUP re-reads the file: settings"
	p "marked reloadable take effect, a change to any other is refused."
	p ".SH SETTINGS"
	"$culpritd" --config-doc | awk -F' [|] ' '/^[|] `/ {
		name = $1; sub(/^[|] `/, "", name); sub(/`$/, "", name)
		def = $3; gsub(/`/, "", def)
		mean = $6; sub(/ [|]$/, "", mean); gsub(/`/, "", mean)
		printf ".TP\n.B %s\n", name
		printf "%s; default \"%s\"%s%s.\n", $2, def, ($4 != "" ? "; " $4 : ""), ($5 == "yes" ? "; reloadable" : "")
		print mean
	}' | sed -e 's/\\/\\e/g'
	p ".SH SEE ALSO"
	p ".BR culpritd (8);"
	p "docs/config.md in the source tree is the same table."
} >"$out/culpritd.conf.5"

commands=$("$culprit" --help 2>&1 | sed -n 's/^  \([a-z]*\)  .*/\1/p')
{
	p ".TH CULPRIT 1 \"\" \"culprit $version\" \"User Commands\""
	p ".nh"
	p ".ad l"
	p ".SH NAME"
	p "culprit \\- diagnose, simulate, replay and inspect distributed training jobs"
	p ".SH SYNOPSIS"
	for cmd in $commands; do
		"$culprit" "$cmd" --help 2>&1 | help2roff only
	done
	p ".PP"
	p ".B culprit \\-\\-version"
	p ".SH DESCRIPTION"
	p "culprit diagnoses trace files offline with the method of"
	p ".BR culpritd (8),"
	p "simulates jobs with a known fault, streams files into culpritd as its agents would,"
	p "and fetches traces and raw kernel events of chosen ranks from it. Its commands:"
	"$culprit" --help 2>&1 | help2roff skip
	p ".SH OPTIONS"
	for cmd in $commands; do
		p ".SS \"culprit $cmd\""
		"$culprit" "$cmd" --help 2>&1 | help2roff skip
	done
	p ".SH EXIT STATUS"
	p "0 success; 1 failure (the message says why); 2 bad usage or a refused input file."
	p ".SH ENVIRONMENT"
	p ".TP"
	p ".B CULPRIT_TOKEN"
	p "the agent token of \\fBsim\\fR and \\fBreplay\\fR when \\fB\\-\\-token\\fR is not given."
	p ".TP"
	p ".B CULPRIT_API_TOKEN"
	p "the REST token of \\fBtrace\\fR and \\fBcapture\\fR when \\fB\\-\\-token\\fR is not given."
	p ".SH FILES"
	p ".TP"
	p ".I *.jsonl, *.jsonl.gz"
	p "the interchange format that \\fBsim\\fR writes and \\fBdiagnose\\fR and \\fBreplay\\fR read"
	p "(docs/format.md); they read PyTorch profiler and Chrome traces and worker CSVs too."
	p ".SH EXAMPLES"
	p "The seed incident, simulated to a file, then diagnosed as text:"
	p ".PP"
	p ".nf"
	p ".RS"
	p "culprit sim \\-\\-scenario case5 \\-\\-out case5.jsonl.gz"
	p "culprit diagnose \\-\\-text case5.jsonl.gz"
	p ".RE"
	p ".fi"
	p ".PP"
	p "The same job streamed into culpritd, then the culprits' timeline for ui.perfetto.dev:"
	p ".PP"
	p ".nf"
	p ".RS"
	p "culprit replay \\-\\-server 127.0.0.1:7433 case5.jsonl.gz"
	p "culprit trace \\-\\-server http://127.0.0.1:7434 \\-\\-job case5 \\e"
	p "    \\-\\-ranks 10352\\-10359 \\-o case5.perfetto"
	p ".RE"
	p ".fi"
	p ".SH SEE ALSO"
	p ".BR culpritd (8);"
	p "docs/cli.md and docs/format.md in the source tree."
} >"$out/culprit.1"
