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

# Text as roff: backslashes doubled, a leading dot or quote protected.
p() { printf '%s\n' "$*"; }
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

{
	p ".TH CULPRITD 8 \"\" \"culprit $version\" \"System Administration\""
	p ".SH NAME"
	p "culpritd \\- diagnosis server for distributed training: names the ranks that slow a job"
	p ".SH SYNOPSIS"
	p ".B culpritd"
	p "[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-t\\fR] [\\fB\\-\\-\\fISETTING VALUE\\fR ...]"
	p ".SH DESCRIPTION"
	p "culpritd takes the phase and kernel timings that agents stream from every rank of a"
	p "training job, finds the iterations that slowed, names the few ranks that cause it and"
	p "the kind of fault, stores records and reports in PostgreSQL (its own embedded cluster"
	p "unless \\fBdb\\fR names one), alerts on-call and answers a REST API. Every setting can be"
	p "given in the configuration file or on the command line; see"
	p ".BR culpritd.conf (5)."
	p ".SH OPTIONS"
	p ".nf"
	"$culpritd" --help | roff
	p ".fi"
	p ".SH SIGNALS"
	p ".TP"
	p ".B SIGHUP"
	p "re-read the configuration file; reloadable settings take effect, a file with an error keeps the old configuration."
	p ".TP"
	p ".BR SIGTERM ", " SIGINT"
	p "stop accepting, commit what agents sent, send their acknowledgements, stop the embedded PostgreSQL and exit (30 s at most); a second signal exits at once."
	p ".SH FILES"
	p ".TP"
	p ".I data_dir/pg"
	p "the embedded PostgreSQL cluster and its socket."
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

{
	p ".TH CULPRIT 1 \"\" \"culprit $version\" \"User Commands\""
	p ".SH NAME"
	p "culprit \\- diagnose, simulate, replay and inspect distributed training jobs"
	p ".SH SYNOPSIS"
	p ".nf"
	"$culprit" --help 2>&1 | roff
	p ".fi"
	for cmd in $("$culprit" --help 2>&1 | sed -n 's/^  \([a-z]*\)  .*/\1/p'); do
		p ".SH \"CULPRIT $(echo "$cmd" | tr a-z A-Z)\""
		p ".nf"
		"$culprit" "$cmd" --help 2>&1 | roff
		p ".fi"
	done
	p ".SH EXIT STATUS"
	p "0 success; 1 failure (the message says why); 2 bad usage or a refused input file."
	p ".SH SEE ALSO"
	p ".BR culpritd (8);"
	p "docs/cli.md and docs/format.md in the source tree."
} >"$out/culprit.1"
