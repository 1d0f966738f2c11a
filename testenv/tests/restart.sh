#!/usr/bin/env bash
# testenv/restart-apiserver brings the apiserver back on the same port with
# the same etcd: objects survive, and a watch through the proxy is ended.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${KCR_TESTENV_PROXY_CONTROL:-} ]] ||
	fail "needs a testenv started by testenv/start (restart-apiserver restarts its apiserver)"
kc_load d "$KCR_TESTENV_KUBECONFIG"
kc_load p "$KCR_TESTENV_PROXY_KUBECONFIG"
cm=kcr-restart-test-$$
trap 'kcurl d "/api/v1/namespaces/default/configmaps/$cm" -X DELETE >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

body=$(kcurl d /api/v1/namespaces/default/configmaps -X POST -H 'Content-Type: application/json' \
	-d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$cm\"},\"data\":{\"k\":\"v\"}}")
expect_code 201 "create configmap"
rv=$(jq -r .metadata.resourceVersion <<<"$body")

kcurl p "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=$rv&timeoutSeconds=120" -N >"$tmp/watch" &
watch_pid=$!
sleep 1
"$testenv_src/restart-apiserver" >/dev/null 2>"$tmp/restart.log" || fail "restart-apiserver failed: $(cat "$tmp/restart.log")"
for ((i = 0; i < 100; i++)); do
	kill -0 "$watch_pid" 2>/dev/null || break
	sleep 0.2
done
if kill -0 "$watch_pid" 2>/dev/null; then kill "$watch_pid"; fail "watch survived the restart"; fi
ok "the watch through the proxy ended with the restart"

body=$(kcurl d "/api/v1/namespaces/default/configmaps/$cm")
expect_code 200 "configmap after restart (same port $KCR_TESTENV_APISERVER_PORT)"
[[ $(jq -r .metadata.resourceVersion <<<"$body") == "$rv" ]] || fail "configmap changed across the restart: $body"
ok "apiserver back on port $KCR_TESTENV_APISERVER_PORT with the same etcd data"
echo "restart: all checks passed"
