#!/usr/bin/env bash
# Each fault of the fault proxy does what it says, and the counters count.
# Bounds on time are generous: they only tell "happened" from "never happened".
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -n ${KCR_TESTENV_PROXY_CONTROL:-} ]] ||
	fail "no fault proxy in $KCR_TESTENV_DIR/env: the proxy needs a testenv started by testenv/start"
kc_load p "$KCR_TESTENV_PROXY_KUBECONFIG" # through the proxy
kc_load d "$KCR_TESTENV_KUBECONFIG"       # straight to the apiserver
proxy_port=${KCR_TESTENV_PROXY_SERVER##*:}
ns=kcr-proxy-test-$$
watch_pid=
cleanup() {
	[[ -z $watch_pid ]] || kill "$watch_pid" 2>/dev/null || true
	"$testenv_src/fault" clear >/dev/null 2>&1 || true
	kcurl d "/api/v1/namespaces/$ns" -X DELETE >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fault clear
fault reset-counts

# start_watch: a namespace watch through the proxy, output in $tmp/watch;
# returns once the first events (the existing namespaces) have arrived.
start_watch() {
	: >"$tmp/watch"
	kcurl p "/api/v1/namespaces?watch=true&timeoutSeconds=120" -N >"$tmp/watch" &
	watch_pid=$!
	for ((i = 0; i < 100; i++)); do
		[[ ! -s $tmp/watch ]] || return 0
		sleep 0.2
	done
	fail "watch through the proxy got no event in 20 s"
}
# watch_end: wait (up to 20 s) for the watch to end; set rc to curl's exit
# code, or to "running".
watch_end() {
	rc=0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$watch_pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$watch_pid" 2>/dev/null; then rc=running; return; fi
	wait "$watch_pid" || rc=$?
	watch_pid=
}
create_ns() {
	kcurl d /api/v1/namespaces -X POST -H 'Content-Type: application/json' \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$1\"}}" >/dev/null
	expect_code 201 "create namespace $1"
}

# ---- counts (on paths only this test uses) -------------------------------
cms=/api/v1/namespaces/$ns/configmaps
for _ in 1 2 3; do kcurl p "$cms" >/dev/null; done
kcurl p "$cms/none" >/dev/null
kcurl p "$cms?watch=1&timeoutSeconds=1" >/dev/null
c=$("$testenv_src/fault" counts)
[[ $(jq ".requests[\"list $cms\"]" <<<"$c") == 3 ]] || fail "3 lists of $cms not counted: $c"
[[ $(jq ".requests[\"get $cms/none\"]" <<<"$c") == 1 ]] || fail "get not counted: $c"
[[ $(jq ".requests[\"watch $cms\"]" <<<"$c") == 1 ]] || fail "watch not counted: $c"
(($(jq '.total' <<<"$c") >= 5 && $(jq '.verbs.list' <<<"$c") >= 3)) || fail "totals wrong: $c"
[[ $(jq '.statuses["404"]' <<<"$c") -ge 1 ]] || fail "404 of the get not counted: $c"
ok "counts: 3 lists, 1 get, 1 watch"

# ---- 429 with Retry-After, then 500 ----------------------------------------
fault 429 2 7
for i in 1 2; do
	body=$(kcurl p /api/v1/namespaces -D "$tmp/headers")
	expect_code 429 "request $i after fault 429"
	grep -qi '^retry-after: 7' "$tmp/headers" || fail "429 without Retry-After: 7: $(cat "$tmp/headers")"
	jq -e '.kind == "Status" and .reason == "TooManyRequests" and .code == 429' <<<"$body" >/dev/null ||
		fail "429 body is no Status: $body"
done
kcurl p /api/v1/namespaces >/dev/null
expect_code 200 "third request after fault 429 2"
ok "429 twice with Retry-After: 7, then 200"

fault 500 1 /api/v1/namespaces/default
kcurl p /version >/dev/null
expect_code 200 "request not matching the 500 rule"
kcurl p /api/v1/namespaces/default >/dev/null
expect_code 500 "matching request after fault 500"
kcurl p /api/v1/namespaces/default >/dev/null
expect_code 200 "second matching request after fault 500 1"
[[ $(counts '.injected["429"]') == 2 && $(counts '.injected["500"]') == 1 ]] || fail "injected counts wrong"
ok "500 once on the matching path, then 200"

# ---- cut -------------------------------------------------------------------
start_watch
fault cut
watch_end
[[ $rc != running ]] || fail "watch still open 20 s after cut"
[[ $rc != 0 ]] || fail "watch ended cleanly after cut; want an error"
ok "cut: the open watch failed at once (curl exit $rc)"

# ---- stall -----------------------------------------------------------------
start_watch
size=$(stat -c %s "$tmp/watch")
fault stall 8
create_ns "$ns" # an event the stalled watch must not deliver yet
if kcurl p /version --max-time 2 >/dev/null 2>&1; then fail "a request went through during the stall"; fi
sleep 1
[[ $(stat -c %s "$tmp/watch") == "$size" ]] || fail "bytes reached the client during the stall"
ok "stall: no byte for 3 s and a new request timed out"
for ((i = 0; i < 75; i++)); do # the stall ends after 8 s: the event arrives
	grep -q "\"$ns\"" "$tmp/watch" && break
	sleep 0.2
done
grep -q "\"$ns\"" "$tmp/watch" || fail "event not delivered after the stall ended"
ok "stall: the held event arrived after the stall"
kill "$watch_pid"
wait "$watch_pid" 2>/dev/null || true
watch_pid=

# ---- delay -----------------------------------------------------------------
fault delay 300
t0=$EPOCHREALTIME
kcurl p /version >/dev/null
t1=$EPOCHREALTIME
fault delay 0
ms=$(( (${t1/./} - ${t0/./}) / 1000 ))
expect_code 200 "request with delay"
((ms >= 300)) || fail "request with 300 ms delay took only ${ms} ms"
ok "delay: a request took ${ms} ms (>= 300)"

# ---- refuse ----------------------------------------------------------------
fault refuse 3
[[ -z $(ss -Htln "sport = :$proxy_port") ]] || fail "proxy port still listening while refusing"
rc=0
kcurl p /version --max-time 5 >/dev/null 2>&1 || rc=$?
[[ $rc == 7 ]] || fail "want connection refused (curl exit 7) while refusing, got $rc"
for ((i = 0; i < 75; i++)); do
	kcurl p /version >/dev/null 2>&1 && break
	sleep 0.2
done
[[ $(code) == 200 ]] || fail "proxy did not accept again after refuse 3"
ok "refuse: connection refused, then accepted again on the same port"
echo "proxy: all checks passed"
