#!/usr/bin/env bash
# No credential leaks: runs every example and the e2e client suite against
# the testenv at the most verbose log level (KCR_LOG=trace, which also logs
# every HTTP exchange's headers) and proves that
#   - no bearer token, password, client key (PEM body or its base64) or
#     Authorization header value from the testenv kubeconfigs appears in
#     anything they printed, and
#   - nothing credential-like (those secrets, or any PEM private key) was
#     written under TMPDIR or the work tree (source and build trees; the
#     testenv's own directory, which holds the kubeconfigs, excepted).
# Usage: credentials.sh SOURCE_DIR BUILD_DIR   (reads $KCR_TESTENV_DIR/env)
set -euo pipefail

src=${1:?usage: credentials.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: credentials.sh SOURCE_DIR BUILD_DIR}
KCR_TESTENV_DIR=${KCR_TESTENV_DIR:-/tmp/kcr-testenv}
fail() { printf 'FAIL credentials: %s\n' "$*" >&2; exit 1; }
ok() { printf 'ok   credentials: %s\n' "$*"; }

[[ -f $KCR_TESTENV_DIR/env ]] || fail "no testenv in $KCR_TESTENV_DIR: run testenv/start"
# shellcheck source=/dev/null
source "$KCR_TESTENV_DIR/env"
testenv_dir=$(cd "$KCR_TESTENV_DIR" && pwd -P)
examples=(kcr-get configmap-watch configmap-apply job-runner leader-election) # each is run below
for ex in $(sed -n 's/^add_executable(\([^ )]*\).*/\1/p' "$src/examples/CMakeLists.txt"); do
	[[ " ${examples[*]} " == *" $ex "* ]] ||
		fail "example $ex is not run by this test: add it to tests/e2e/credentials.sh"
done
for bin in "${examples[@]/#/examples/}" tests/test_e2e_client; do
	[[ -x $build/$bin ]] || fail "$build/$bin not built: ninja -C $build $(basename "$bin")"
done

# Everything the programs print goes to $out (outside the scanned trees);
# their TMPDIR is a fresh directory, scanned afterwards.
out=$(mktemp -d)
scratch=$(mktemp -d)
trap 'rm -rf "$out" "$scratch"' EXIT
marker=$out/marker
touch "$marker"

# ---- the secrets: every credential in the testenv's kubeconfigs ----
secrets=$out/secrets # one fixed string per line; never printed
: >"$secrets"
for kc in "$KCR_TESTENV_DIR"/*.kubeconfig; do
	while read -r field value; do
		case $field in
		token: | password:)
			printf '%s\n' "$value" >>"$secrets"
			printf 'Bearer %s\n' "$value" >>"$secrets"
			;;
		client-key-data:)
			printf '%s\n' "${value:0:64}" >>"$secrets"
			# each line of the PEM body, and the body joined
			base64 -d <<<"$value" | grep -v -- '-----' | grep -E '.{32,}' >>"$secrets" || true
			;;
		esac
	done < <(sed -n 's/^ *\(token:\|password:\|client-key-data:\) *\(.*\)$/\1 \2/p' "$kc")
done
sort -u -o "$secrets" "$secrets"
[[ -n ${KCR_TESTENV_TOKEN:-} ]] && grep -qxF "$KCR_TESTENV_TOKEN" "$secrets" ||
	fail "the testenv's bearer token was not found in its kubeconfigs"
n_secrets=$(wc -l <"$secrets")
((n_secrets >= 4)) || fail "only $n_secrets secrets found in $KCR_TESTENV_DIR/*.kubeconfig"
ok "$n_secrets secret strings from $(ls "$KCR_TESTENV_DIR"/*.kubeconfig | wc -l) kubeconfigs"

# ---- run everything at TRACE ----
export KCR_LOG=trace TMPDIR=$scratch
run() { # NAME CMD...: output to $out/NAME.log, must succeed
	local name=$1
	shift
	"$@" >"$out/$name.log" 2>&1 || fail "$name failed ($?): $(tail -n 5 "$out/$name.log")"
}
ns=kcr-credentials-$$
for who in admin token; do
	kc=$KCR_TESTENV_DIR/$who.kubeconfig
	run "kcr-get-$who" "$build/examples/kcr-get" --kubeconfig "$kc" configmaps -n default
	run "kcr-get-yaml-$who" "$build/examples/kcr-get" --kubeconfig "$kc" namespaces -o yaml
done
# the limited user is forbidden (an error path, with the server's Status)
"$build/examples/kcr-get" --kubeconfig "$KCR_TESTENV_DIR/limited.kubeconfig" configmaps \
	-n default >"$out/kcr-get-limited.log" 2>&1 && fail "the limited user listed configmaps"
grep -q Forbidden "$out/kcr-get-limited.log" || fail "kcr-get as the limited user: $(tail -n 3 "$out/kcr-get-limited.log")"
run kcr-get-proxy "$build/examples/kcr-get" --kubeconfig "$KCR_TESTENV_DIR/token-proxy.kubeconfig" \
	configmaps -A -o json

admin=$KCR_TESTENV_DIR/admin.kubeconfig
token=$KCR_TESTENV_DIR/token.kubeconfig
run create-ns "$build/examples/configmap-apply" --kubeconfig "$admin" --namespace default \
	set "$ns" k v # a ConfigMap named like the test, so its watcher below has something to see
"$build/examples/configmap-watch" --kubeconfig "$token" --namespace default >"$out/watch.log" 2>&1 &
watch_pid=$!
trap 'kill "$watch_pid" 2>/dev/null || true; rm -rf "$out" "$scratch"' EXIT
deadline=$((SECONDS + 60))
until grep -q "ADDED *default/$ns" "$out/watch.log"; do
	((SECONDS < deadline)) || fail "configmap-watch never listed default/$ns: $(tail -n 5 "$out/watch.log")"
	kill -0 "$watch_pid" 2>/dev/null || fail "configmap-watch exited: $(tail -n 5 "$out/watch.log")"
	sleep 0.2
done
run apply-update "$build/examples/configmap-apply" --kubeconfig "$token" --namespace default \
	set "$ns" k v2
until grep -q "UPDATED *default/$ns" "$out/watch.log"; do
	((SECONDS < deadline)) || fail "configmap-watch never saw the update of default/$ns"
	sleep 0.2
done
run apply-delete "$build/examples/configmap-apply" --kubeconfig "$admin" --namespace default \
	delete "$ns"
until grep -q "DELETED *default/$ns" "$out/watch.log"; do
	((SECONDS < deadline)) || fail "configmap-watch never saw the delete of default/$ns"
	sleep 0.2
done
kill -TERM "$watch_pid"
wait "$watch_pid" || fail "configmap-watch did not exit cleanly on SIGTERM: $(tail -n 5 "$out/watch.log")"
run job-runner "$build/examples/job-runner" --jobs 50 --duration 1
# leader-election: campaign with the token, lead, release on SIGTERM (the
# released Lease stays, named after this run)
deadline=$((SECONDS + 60))
"$build/examples/leader-election" --kubeconfig "$token" --namespace default --lease "$ns" \
	--identity credentials-test >"$out/leader.log" 2>&1 &
leader_pid=$!
until grep -q STARTED_LEADING "$out/leader.log"; do
	((SECONDS < deadline)) || fail "leader-election never led: $(tail -n 5 "$out/leader.log")"
	kill -0 "$leader_pid" 2>/dev/null || fail "leader-election exited: $(tail -n 5 "$out/leader.log")"
	sleep 0.2
done
kill -TERM "$leader_pid"
wait "$leader_pid" || fail "leader-election did not exit cleanly on SIGTERM: $(tail -n 5 "$out/leader.log")"
run kcr-get-lease "$build/examples/kcr-get" --kubeconfig "$admin" leases -n default "$ns" -o json
run e2e-client "$build/tests/test_e2e_client" --jobs=1
grep -q 'Synthesis: Tested: [1-9]' "$out/e2e-client.log" || fail "the e2e client suite ran no test"

# The trace really is the most verbose one: request headers were logged.
grep -q '^TRACE curl: > GET ' "$out/kcr-get-token.log" ||
	fail "no request headers in the TRACE log of kcr-get: is KCR_LOG honoured?"
grep -qi '^TRACE curl: > authorization <redacted>' "$out/kcr-get-token.log" ||
	fail "the token user's Authorization header is not logged (redacted) at TRACE"
ok "examples and the e2e client suite ran at TRACE ($(cat "$out"/*.log | wc -l) lines of output)"

# ---- scan ----
leaks=$(grep -rlF -f "$secrets" "$out" --include='*.log' || true)
# (the report names files and line numbers, never the secret)
[[ -z $leaks ]] || fail "a credential from the kubeconfigs appears in: $(for f in $leaks; do
	printf '%s (line %s) ' "$f" "$(grep -nF -f "$secrets" "$f" | head -n1 | cut -d: -f1)"
done)"
ok "no token, password, client key or Authorization value in any output"

# New files under TMPDIR, /tmp (code that ignores TMPDIR) and the work tree.
mapfile -d '' new_files < <(find "$scratch" /tmp "$src" "$build" -xdev \
	\( -path "$testenv_dir" -o -path "$(cd "$src" && pwd -P)/.git" -o -path "$out" \) -prune -o \
	-type f -newer "$marker" -readable -print0 2>/dev/null)
if ((${#new_files[@]})); then
	found=$(grep -lF -f "$secrets" "${new_files[@]}" 2>/dev/null || true)
	[[ -z $found ]] || fail "credentials written to: $found"
	found=$(grep -lE -- '-----BEGIN ([A-Z]+ )?PRIVATE KEY-----' "${new_files[@]}" 2>/dev/null || true)
	[[ -z $found ]] || fail "a private key was written to: $found"
fi
ok "nothing credential-like among ${#new_files[@]} files written under TMPDIR, /tmp or the work tree"
