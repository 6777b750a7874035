#!/usr/bin/env bash
# install-deps.sh: installs the Debian packages culprit needs, only those missing.
# Sourced by run.sh and test.sh; run it alone to prepare a machine.
#   ./install-deps.sh           build and run (culpritd, culprit, embedded PostgreSQL)
#   ./install-deps.sh test      also what the tests need
#   ./install-deps.sh lint      also what tests/lint.sh needs
set -euo pipefail

culprit_packages=(build-essential cmake pkg-config libevent-dev libpq-dev libprotobuf-c-dev
	protobuf-c-compiler libjansson-dev libgsl-dev zlib1g-dev libisal-dev libssl-dev libcurl4-openssl-dev
	postgresql postgresql-client)
culprit_test_packages=(libcmocka-dev protobuf-compiler clang procps psmisc openssl curl jq python3
	prometheus prometheus-alertmanager wrk python3-torch python3-venv slurm-wlm munge chromium man-db)
culprit_lint_packages=(clang clang-tidy cppcheck)

culprit_install_deps() {
	local want=("${culprit_packages[@]}") missing=() p
	[ "${1:-}" = test ] && want+=("${culprit_test_packages[@]}")
	[ "${1:-}" = lint ] && want+=("${culprit_lint_packages[@]}")
	for p in "${want[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	echo "installing Debian packages: ${missing[*]}"
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	culprit_install_deps "${1:-}"
fi
