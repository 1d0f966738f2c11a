#!/usr/bin/env bash
# e2e of examples/team-namespaces against testenv (the CTest fixture testenv,
# or KCR_TESTENV_DIR of `testenv/start`): the controller runs as a separate
# process on a real kube-apiserver.
#
#   e2e.sh PATH/TO/team-namespaces
#
# 1. a Team with cpu "0.5" gets its Namespace, ResourceQuota and RoleBinding,
#    each controlled by the Team; the server stores the quota as "500m"
#    and status.ready/namespace are written;
# 2. adding a member updates the RoleBinding; the quota (whose stored form
#    differs from the Team's) is not written again (same resourceVersion);
# 3. a Team whose Namespace name would be too long is refused by the server
#    (422): the controller logs a terminal error naming the object, once,
#    and does not retry it.
# Every wait is bounded (KCR_TESTENV_TEST_TIMEOUT seconds, default 90); the
# controller is stopped and the test's Teams and Namespace deleted on exit (the
# CRD stays: a rerun applies it again).
# shellcheck source=../../../testenv/tests/lib.sh
source "$(dirname "$0")/../../../testenv/tests/lib.sh"
test_name=team-namespaces-e2e
manifests=$(cd "$(dirname "$0")/../manifests" && pwd)
bin=${1:-}
[[ -x $bin ]] || fail "usage: $0 PATH/TO/team-namespaces (build it: ninja -C build team-namespaces)"
timeout=${KCR_TESTENV_TEST_TIMEOUT:-90}
json=(-H 'Content-Type: application/json')
kc_load d "$KCR_TESTENV_KUBECONFIG"

teams=/apis/example.kcr.dev/v1alpha1/teams
crd=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/teams.example.kcr.dev
a=e2e-$$-a
long=e2e-$$-$(printf 'x%.0s' $(seq 1 60))
pid=
cleanup() {
	local rc=$?
	((rc == 0)) || { echo "--- last lines of the controller's log:" >&2; tail -n 20 "$tmp/ctl.log" >&2 || true; }
	[[ -z $pid ]] || { kill -KILL "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
	kcurl d "$teams/$a" -X DELETE >/dev/null 2>&1 || true
	kcurl d "$teams/$long" -X DELETE >/dev/null 2>&1 || true
	kcurl d "/api/v1/namespaces/team-$a" -X DELETE >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

get() { kcurl d "$1" && [[ $(code) == 200 ]]; }
# check PATH JQ: the object at PATH satisfies JQ (prints it when not).
check() {
	local body
	body=$(get "$1") || { echo "GET $1: HTTP $(code)"; return 1; }
	jq -e "$2" <<<"$body" >/dev/null || { echo "$body"; return 1; }
}
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		[[ -n $(ss -Htln "sport = :$p") ]] || { echo "$p"; return; }
	done
}
ready() {
	kill -0 "$pid" 2>/dev/null || { echo "exited: $(tail -n 20 "$tmp/ctl.log")"; return 1; }
	curl -sf "http://127.0.0.1:$port/readyz"
}
logged() { grep -c "$1" "$tmp/ctl.log" || true; }

# ---- the CRD and the controller ------------------------------------------------
kcurl d "$crd?fieldManager=kcr-teams-e2e" -X PATCH -H 'Content-Type: application/apply-patch+yaml' \
	--data-binary "@$manifests/crd.yaml" >/dev/null
[[ $(code) == 200 || $(code) == 201 ]] || fail "apply the Team CRD: HTTP $(cat "$tmp/code")"
wait_until "$timeout" "CRD teams.example.kcr.dev Established" \
	check "$crd" 'any(.status.conditions[]?; .type == "Established" and .status == "True")'
port=$(free_port)
"$bin" --kubeconfig "$KCR_TESTENV_KUBECONFIG" --metrics-bind-address "127.0.0.1:$port" \
	--health-probe-bind-address "127.0.0.1:$port" >"$tmp/ctl.log" 2>&1 &
pid=$!
wait_until "$timeout" "controller ready (/readyz)" ready

# ---- 1. a Team gets its Namespace, quota and binding ---------------------------
kcurl d "$teams" -X POST "${json[@]}" -d "{\"apiVersion\":\"example.kcr.dev/v1alpha1\",\"kind\":\"Team\",
	\"metadata\":{\"name\":\"$a\"},\"spec\":{\"quota\":{\"cpu\":\"0.5\",\"memory\":\"1Gi\"},\"members\":[\"alice\"]}}" >/dev/null
expect_code 201 "create Team $a"
wait_until "$timeout" "Team $a ready" check "$teams/$a" ".status.ready == true and .status.namespace == \"team-$a\""
owned=".metadata.ownerReferences == [{\"apiVersion\":\"example.kcr.dev/v1alpha1\",\"kind\":\"Team\",\"name\":\"$a\",
	\"uid\":$(get "$teams/$a" | jq .metadata.uid),\"controller\":true,\"blockOwnerDeletion\":true}]"
quota=/api/v1/namespaces/team-$a/resourcequotas/team-quota
binding=/apis/rbac.authorization.k8s.io/v1/namespaces/team-$a/rolebindings/team-members
check "/api/v1/namespaces/team-$a" "$owned" >/dev/null || fail "Namespace team-$a not controlled by the Team"
check "$quota" "$owned and .spec.hard == {\"requests.cpu\":\"500m\",\"requests.memory\":\"1Gi\"}" >/dev/null ||
	fail "quota: $(get "$quota" | jq -c '{hard: .spec.hard, owners: .metadata.ownerReferences}')"
check "$binding" "$owned and .roleRef.name == \"edit\" and [.subjects[].name] == [\"alice\"]" >/dev/null ||
	fail "binding: $(get "$binding" | jq -c '{roleRef, subjects}')"
ok "Team $a: Namespace, ResourceQuota (cpu 0.5 stored as 500m) and RoleBinding, owned; status ready"

# ---- 2. a member change updates the binding, the quota is not written ----------
rv=$(get "$quota" | jq -r .metadata.resourceVersion)
kcurl d "$teams/$a" -X PATCH -H 'Content-Type: application/merge-patch+json' \
	-d '{"spec":{"members":["alice","carol"]}}' >/dev/null
expect_code 200 "add carol to Team $a"
wait_until "$timeout" "carol in the binding" check "$binding" '[.subjects[].name] == ["alice","carol"]'
[[ $(get "$quota" | jq -r .metadata.resourceVersion) == "$rv" ]] || fail "the unchanged quota was written again"
ok "a member change updated the binding; the quota kept resourceVersion $rv"

# ---- 3. a refused Team is terminal and named ----------------------------------
kcurl d "$teams" -X POST "${json[@]}" -d "{\"apiVersion\":\"example.kcr.dev/v1alpha1\",\"kind\":\"Team\",
	\"metadata\":{\"name\":\"$long\"},\"spec\":{\"members\":[\"dave\"]}}" >/dev/null
expect_code 201 "create Team $long"
wait_until "$timeout" "terminal error logged for Team $long" \
	grep -q "reconcile $long: terminal error (not retried): invalid object: create namespaces team-$long: 422" "$tmp/ctl.log"
sleep 2 # a retry would come within the rate limiter's first delays (5 ms, 10 ms, ...)
[[ $(logged "reconcile $long: terminal error") == 1 ]] || fail "the refused Team was retried: $(logged "reconcile $long:") errors logged"
check "$teams/$long" '.status == null' >/dev/null || fail "the refused Team got a status"
ok "a Namespace name the server refuses (422) is a terminal error naming the object, not retried"
