#!/usr/bin/env bash
# kcr-get against the testenv, with kubectl's output as the reference:
# - tables: the header kubectl prints (the server's priority-0 columns, and
#   with -A a leading NAMESPACE column for namespaced resources only);
# - -o yaml is a YAML document equal in content to -o json, for one object
#   and for a list.
# Usage: kcr_get.sh PATH/TO/kcr-get   (reads $KCR_TESTENV_DIR/env)
set -euo pipefail

kcr_get=${1:?usage: kcr_get.sh PATH/TO/kcr-get}
KCR_TESTENV_DIR=${KCR_TESTENV_DIR:-/tmp/kcr-testenv}
fail() { printf 'FAIL kcr_get: %s\n' "$*" >&2; exit 1; }
ok() { printf 'ok   kcr_get: %s\n' "$*"; }

[[ -x $kcr_get ]] || fail "$kcr_get not built: ninja kcr-get"
[[ -f $KCR_TESTENV_DIR/env ]] || fail "no testenv in $KCR_TESTENV_DIR: run testenv/start"
python3 -c 'import yaml, json' 2>/dev/null || fail "python3 with PyYAML needed: apt-get install python3-yaml"
# shellcheck source=/dev/null
source "$KCR_TESTENV_DIR/env"
export KUBECONFIG=$KCR_TESTENV_KUBECONFIG

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# header RESOURCE ARGS...: the first line of the table, columns joined by '|'.
header() {
	"$kcr_get" "$@" >"$tmp/table"
	sed -n '1{s/ \{3,\}/|/g; s/ *$//; p}' "$tmp/table"
}

expect_header() { # WANT ARGS...
	local want=$1 got
	shift
	got=$(header "$@") || fail "kcr-get $* failed"
	[[ $got == "$want" ]] || fail "kcr-get $*: header '$got', kubectl prints '$want'"
	ok "kcr-get $*: $want"
}

# What `kubectl get` prints for these in v1.3x.
expect_header 'NAME|DATA|AGE' configmaps -n kube-system
expect_header 'NAMESPACE|NAME|DATA|AGE' configmaps -A
expect_header 'NAME|STATUS|AGE' namespaces
expect_header 'NAME|STATUS|AGE' namespaces -A
expect_header 'NAME|CREATED AT' clusterroles -A

same_content() { # ARGS...: -o json and -o yaml of the same thing agree
	"$kcr_get" "$@" -o json >"$tmp/json" || fail "kcr-get $* -o json failed"
	"$kcr_get" "$@" -o yaml >"$tmp/yaml" || fail "kcr-get $* -o yaml failed"
	python3 - "$tmp/json" "$tmp/yaml" <<'PY' || fail "kcr-get $*: -o yaml differs from -o json"
import json, sys, yaml
j = json.load(open(sys.argv[1]))
y = yaml.safe_load(open(sys.argv[2]))
if j != y:
    print("json:", json.dumps(j, sort_keys=True)[:2000], file=sys.stderr)
    print("yaml:", json.dumps(y, sort_keys=True, default=str)[:2000], file=sys.stderr)
    sys.exit(1)
PY
	grep -q '^{' "$tmp/yaml" && fail "kcr-get $* -o yaml printed JSON"
	ok "kcr-get $* -o yaml equals -o json"
}

same_content namespaces default
same_content namespaces
same_content configmaps -n kube-system
"$kcr_get" namespaces -o xml 2>"$tmp/err" && fail "-o xml accepted"
grep -q 'allowed formats are: json,yaml' "$tmp/err" || fail "-o xml: $(cat "$tmp/err")"
ok "-o xml is refused with the allowed formats"
