#!/usr/bin/env bash
# With a short --etcd-compaction-interval (testenv/start --compaction-interval
# 10s; the CTest fixture does this), an old resourceVersion expires: an exact
# list at it gets 410 Expired.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"

interval=${KCR_TESTENV_COMPACTION_INTERVAL:-}
[[ $interval =~ ^([0-9]|[1-2][0-9]|30)s$ ]] ||
	fail "needs a compaction interval of at most 30s, have '${interval:-default}': run testenv/stop; testenv/start --compaction-interval 10s"
kc_load d "$KCR_TESTENV_KUBECONFIG"
cm=kcr-compaction-test-$$
path=/api/v1/namespaces/default/configmaps
trap 'kcurl d "$path/$cm" -X DELETE >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

body=$(kcurl d "$path" -X POST -H 'Content-Type: application/json' \
	-d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$cm\"},\"data\":{\"n\":\"0\"}}")
expect_code 201 "create configmap"
old_rv=$(jq -r .metadata.resourceVersion <<<"$body")

# Keep writing (so compaction has newer revisions to keep) until the old
# resourceVersion is gone; at most 3 minutes.
for ((n = 1; n <= 180; n++)); do
	kcurl d "$path/$cm" -X PATCH -H 'Content-Type: application/merge-patch+json' -d "{\"data\":{\"n\":\"$n\"}}" >/dev/null
	body=$(kcurl d "$path?resourceVersion=$old_rv&resourceVersionMatch=Exact")
	[[ $(code) == 410 ]] && break
	sleep 1
done
[[ $(code) == 410 ]] || fail "resourceVersion $old_rv never expired (last status $(code)): $body"
jq -e '.reason == "Expired"' <<<"$body" >/dev/null || fail "410 without reason Expired: $body"
ok "list at expired resourceVersion $old_rv: 410 \"$(jq -r .message <<<"$body")\" after ${n}s"

# A watch from there is served from the apiserver's watch cache while the
# cache still holds that resourceVersion (so it may well succeed); without
# the cache (KCR_TESTENV_APISERVER_ARGS=--watch-cache=false) it reaches etcd
# and ends with an ERROR event carrying a 410 Status. Either is fine here;
# anything else is not.
body=$(kcurl d "$path?watch=1&resourceVersion=$old_rv&timeoutSeconds=3")
case $(code) in
200) if jq -se 'any(.[]; .type == "ERROR" and .object.code == 410)' <<<"$body" >/dev/null; then
		ok "watch from $old_rv: ERROR event \"$(jq -rs 'map(select(.type == "ERROR"))[0].object.message' <<<"$body")\""
	elif jq -se 'all(.[]; .type == "MODIFIED" or .type == "ADDED")' <<<"$body" >/dev/null; then
		ok "watch from $old_rv: served from the watch cache ($(jq -s length <<<"$body") events)"
	else
		fail "watch from an expired resourceVersion: unexpected events: $body"
	fi ;;
410) ok "watch from $old_rv: HTTP 410 \"$(jq -r .message <<<"$body")\"" ;;
*) fail "watch from an expired resourceVersion: HTTP $(code): $body" ;;
esac
echo "compaction: all checks passed"
