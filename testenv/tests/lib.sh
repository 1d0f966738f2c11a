# shellcheck shell=bash
# Helpers for the testenv e2e tests (sourced). They talk to whatever
# $KCR_TESTENV_DIR/env describes: the testenv started by testenv/start, or
# another cluster adopted by testenv/adopt (e.g. kind).
set -euo pipefail

KCR_TESTENV_DIR=${KCR_TESTENV_DIR:-/tmp/kcr-testenv}
testenv_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
test_name=$(basename "$0" .sh)

fail() { printf 'FAIL %s: %s\n' "$test_name" "$*" >&2; exit 1; }
ok() { printf 'ok   %s: %s\n' "$test_name" "$*"; }

# Missing pieces are failures with a hint, never skips.
for tool in curl jq ss; do
	command -v "$tool" >/dev/null || fail "$tool not found: apt-get install curl jq iproute2"
done
[[ -f $KCR_TESTENV_DIR/env ]] ||
	fail "no testenv in $KCR_TESTENV_DIR (no env file): run testenv/start (it builds kube-apiserver and etcd with testenv/build on first use), or testenv/adopt KUBECONFIG for an existing cluster"
unset KCR_TESTENV_CLUSTER # only a cluster-mode env file sets it
# shellcheck source=/dev/null
source "$KCR_TESTENV_DIR/env"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# kc_load NAME KUBECONFIG: extract server, CA, client cert/key or token of a
# single-cluster, single-user kubeconfig (what kind and testenv write) into
# $tmp/NAME.*, for curl.
kc_load() {
	local name=$1 kc=$2
	[[ -f $kc ]] || fail "kubeconfig $kc missing: run testenv/start"
	field() { sed -n "s/^ *$1: *//p" "$kc" | head -n1; }
	field server >"$tmp/$name.server"
	field certificate-authority-data | base64 -d >"$tmp/$name.ca"
	field client-certificate-data | base64 -d >"$tmp/$name.crt"
	field client-key-data | base64 -d >"$tmp/$name.key"
	field token >"$tmp/$name.token"
	[[ -s $tmp/$name.server && -s $tmp/$name.ca ]] || fail "$kc: no server or certificate-authority-data"
}

# kcurl NAME PATH [CURL-ARGS...]: curl PATH on NAME's server as NAME's user.
# Prints the body; the status code goes to $tmp/code.
kcurl() {
	local name=$1 path=$2 auth
	shift 2
	if [[ -s $tmp/$name.token ]]; then
		auth=(-H "Authorization: Bearer $(cat "$tmp/$name.token")")
	else
		auth=(--cert "$tmp/$name.crt" --key "$tmp/$name.key")
	fi
	curl -sS --cacert "$tmp/$name.ca" "${auth[@]}" -w '%{stderr}%{http_code}' \
		"$(cat "$tmp/$name.server")$path" "$@" 2>"$tmp/code"
}
code() { tail -c 3 "$tmp/code"; }

# expect_code WANT WHAT: fail unless the last kcurl got status WANT.
expect_code() {
	[[ $(code) == "$1" ]] || fail "$2: want HTTP $1, got $(cat "$tmp/code")"
}

# fault ARGS: run testenv/fault quietly.
fault() { "$testenv_src/fault" "$@" >/dev/null; }

# counts JQ-EXPR: evaluate JQ-EXPR on the proxy's counters.
counts() { "$testenv_src/fault" counts | jq -r "$1"; }

# wait_until SECONDS WHAT CMD...: retry CMD every 0.5 s until it succeeds;
# fail saying WHAT did not happen within SECONDS, with CMD's last output.
wait_until() {
	local secs=$1 what=$2 deadline out
	shift 2
	deadline=$((SECONDS + secs))
	until out=$("$@" 2>&1); do
		((SECONDS < deadline)) || fail "$what: not within ${secs}s (last: ${out:0:600})"
		sleep 0.5
	done
}
