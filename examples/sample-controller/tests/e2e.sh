#!/usr/bin/env bash
# e2e of examples/sample-controller against testenv cluster mode (the CTest
# fixture testenv_cluster, or KCR_TESTENV_DIR of `testenv/start --cluster`):
# the controller runs as separate processes, exactly as a user runs it.
#
#   e2e.sh PATH/TO/sample-controller
#
# 0. the manifests are applied: the CRD, rbac.yaml (every controller process
#    runs with a token of its ServiceAccount, so a missing grant fails the
#    test), deployment.yaml with a server-side dry run;
# 1. a Foo gets its Deployment (controlled by the Foo,
#    written by field manager sample-controller), the Pods run on kwok's
#    Node and Foo.status.availableReplicas reaches spec.replicas; events
#    Synced; /readyz and /metrics answer;
# 2. scaling the Foo scales the Deployment and the status follows;
# 3. a Foo naming a Deployment it does not control gets the Warning event
#    ErrResourceExists and the Deployment is left alone;
# 4. kill -9 of the controller, changes while it is down, a restart: it
#    converges;
# 5. two replicas with --leader-elect: one holds the Lease (in the
#    namespace of its kubeconfig context) and is the only
#    one reconciling; stopping it (SIGTERM releases the Lease) hands over;
# 6. deleting the Foo garbage-collects its Deployment and Pods.
# Every wait is bounded (KCR_TESTENV_TEST_TIMEOUT seconds, default 90);
# every controller started is stopped, and the namespace deleted, on exit.
# shellcheck source=../../../testenv/tests/lib.sh
source "$(dirname "$0")/../../../testenv/tests/lib.sh"
test_name=sample-controller-e2e
manifests=$(cd "$(dirname "$0")/../manifests" && pwd)

bin=${1:-}
[[ -x $bin ]] || fail "usage: $0 PATH/TO/sample-controller (build it: ninja -C build sample-controller)"
kc_load d "$KCR_TESTENV_KUBECONFIG"
# testenv cluster mode, or a real cluster adopted with testenv/adopt (kind):
# either way Deployments need controllers and a Ready Node.
if [[ ${KCR_TESTENV_CLUSTER:-} != 1 ]]; then
	kcurl d /api/v1/nodes | jq -e 'any(.items[]; any(.status.conditions[]?; .type == "Ready" and .status == "True"))' >/dev/null ||
		fail "needs a cluster with Nodes (testenv in $KCR_TESTENV_DIR is not in cluster mode): run testenv/stop; testenv/start --cluster (or testenv/adopt a kind cluster's kubeconfig)"
fi
ns=kcr-sample-e2e-$$ # the test's own namespace
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

declare -A pids ports
cleanup() {
	local rc=$? name log
	if ((rc != 0)); then # what the controllers said, for the failure above
		for log in "$tmp"/*.log; do
			[[ -f $log ]] || continue
			echo "--- last lines of controller $(basename "$log" .log)'s log:" >&2
			tail -n 15 "$log" >&2
		done
	fi
	for name in "${!pids[@]}"; do
		kill -KILL "${pids[$name]}" 2>/dev/null || true
		wait "${pids[$name]}" 2>/dev/null || true
	done
	delete_test_objects
}
trap cleanup EXIT

# start_ctl NAME ARGS...: runs the controller (log $tmp/NAME.log, metrics and
# probes on one loopback port) and waits for /readyz.
start_ctl() {
	local name=$1
	shift
	ports[$name]=$(free_port)
	"$bin" --kubeconfig "$kubeconfig" --namespace "$ns" \
		--metrics-bind-address "127.0.0.1:${ports[$name]}" \
		--health-probe-bind-address "127.0.0.1:${ports[$name]}" "$@" >>"$tmp/$name.log" 2>&1 &
	pids[$name]=$!
	wait_until "$timeout" "controller $name ready (/readyz; log: $tmp/$name.log)" ready "$name"
}
ready() {
	kill -0 "${pids[$1]}" 2>/dev/null || { echo "exited: $(tail -n 20 "$tmp/$1.log")"; return 1; }
	curl -sf "http://127.0.0.1:${ports[$1]}/readyz"
}
# stop_ctl NAME [SIGNAL]: signals the controller and waits for it; its exit
# status goes to $rc.
stop_ctl() {
	rc=0
	kill "-${2:-TERM}" "${pids[$1]}"
	wait "${pids[$1]}" 2>/dev/null || rc=$?
	unset "pids[$1]"
}

# ---- the CRD, RBAC (the controller runs as its ServiceAccount) ---------------
install_crd_namespace_rbac
apply "$manifests/deployment.yaml" "&dryRun=All"
kubeconfig=$tmp/sa.kubeconfig # the controller's identity: only what rbac.yaml grants
sa_kubeconfig "$kubeconfig"
kcurl d "$lease" -X DELETE >/dev/null # a Lease left by an earlier run would delay the election
ok "CRD established, namespace $ns, RBAC of rbac.yaml applied (deployment.yaml passes a server dry run)"

# ---- 1. a Foo gets its Deployment, Pods and status ---------------------------
start_ctl one
create_foo example-foo example-foo 2
wait_until "$timeout" "Deployment example-foo created" get "$deploys/example-foo"
foo_uid=$(get "$foos/example-foo" | jq -r .metadata.uid)
check "$deploys/example-foo" "
	(.metadata.ownerReferences | length == 1) and (.metadata.ownerReferences[0] |
		.kind == \"Foo\" and .name == \"example-foo\" and .uid == \"$foo_uid\" and .controller and .blockOwnerDeletion)
	and .spec.selector.matchLabels == {app: \"nginx\", controller: \"example-foo\"}
	and .spec.template.metadata.labels == {app: \"nginx\", controller: \"example-foo\"}
	and (.spec.template.spec.containers | length == 1 and .[0].name == \"nginx\")
	and any(.metadata.managedFields[]; .manager == \"sample-controller\" and .operation == \"Update\")" \
	'{ownerReferences: .metadata.ownerReferences, managers: [.metadata.managedFields[].manager], spec}' >/dev/null ||
	fail "Deployment example-foo is not what sample-controller creates: $(check "$deploys/example-foo" false '{meta: .metadata, spec}')"
ok "Deployment example-foo: controlled by Foo example-foo, labels app=nginx controller=example-foo, field manager sample-controller"
wait_until "$timeout" "2 Pods of example-foo Running and Ready" running_pods example-foo 2
wait_until "$timeout" "Foo example-foo status.availableReplicas == 2" converged example-foo example-foo 2
ok "Pods Running on kwok, Foo example-foo status.availableReplicas == 2"
events=/apis/events.k8s.io/v1/namespaces/$ns/events
synced_event() {
	check "$events" '[.items[] | select(.regarding.kind == "Foo" and .regarding.name == "example-foo"
		and .type == "Normal" and .reason == "Synced" and .note == "Foo synced successfully"
		and .reportingController == "sample-controller")] | length > 0' '[.items[] | [.regarding.name, .reason]]'
}
wait_until "$timeout" "Normal event Synced about Foo example-foo" synced_event
metrics=$(curl -sf "http://127.0.0.1:${ports[one]}/metrics") || fail "GET /metrics of the controller failed"
grep -Eq '^controller_runtime_reconcile_total\{controller="sample-controller",result="success"\} [1-9]' <<<"$metrics" ||
	fail "/metrics has no successful reconciles: $(grep reconcile_total <<<"$metrics")"
ok "event Synced recorded; /readyz ok; /metrics counts successful reconciles"

# ---- 2. scaling ---------------------------------------------------------------
scale_foo example-foo 4
wait_until "$timeout" "Deployment and Foo status follow to 4" converged example-foo example-foo 4
wait_until "$timeout" "4 Pods of example-foo Running" running_pods example-foo 4
scale_foo example-foo 1
wait_until "$timeout" "Deployment and Foo status follow to 1" converged example-foo example-foo 1
wait_until "$timeout" "1 Pod of example-foo left Running" running_pods example-foo 1
ok "scaled 2 -> 4 -> 1: Deployment, Pods and Foo status followed"

# ---- 3. a Deployment the Foo does not control ----------------------------------
kcurl d "$deploys" -X POST "${json[@]}" -d '{"apiVersion":"apps/v1","kind":"Deployment",
	"metadata":{"name":"foreign"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"foreign"}},
	"template":{"metadata":{"labels":{"app":"foreign"}},"spec":{"containers":[{"name":"c","image":"registry.invalid/c"}]}}}}' >/dev/null
expect_code 201 "create Deployment foreign"
create_foo intruder foreign 3
warned() {
	check "$events" '[.items[] | select(.regarding.name == "intruder" and .type == "Warning"
		and .reason == "ErrResourceExists"
		and .note == "Resource \"foreign\" already exists and is not managed by Foo")] | length > 0' \
		'[.items[] | [.regarding.name, .type, .reason, .note]]'
}
wait_until "$timeout" "Warning event ErrResourceExists about Foo intruder" warned
wait_until "$timeout" "the controller logs the refusal" grep -q 'Resource "foreign" already exists and is not managed by Foo' "$tmp/one.log"
check "$deploys/foreign" '(.metadata.ownerReferences // [] | length == 0) and .spec.replicas == 1
	and all(.metadata.managedFields[]; .manager != "sample-controller")' '{meta: .metadata, spec: .spec.replicas}' >/dev/null ||
	fail "Deployment foreign was taken over: $(check "$deploys/foreign" false '{meta: .metadata, spec: .spec.replicas}')"
check "$foos/intruder" '.status.availableReplicas == null' .status >/dev/null ||
	fail "Foo intruder got a status from a Deployment it does not control"
ok "foreign Deployment: Warning ErrResourceExists on Foo intruder, Deployment untouched"
kcurl d "$foos/intruder" -X DELETE >/dev/null

# ---- 4. kill -9 mid-way, changes while down, restart ---------------------------
scale_foo example-foo 3
stop_ctl one KILL
[[ $rc == 137 ]] || fail "kill -9 of the controller: want exit status 137, got $rc"
scale_foo example-foo 2
create_foo late late 2
start_ctl two
wait_until "$timeout" "after the restart: example-foo converged at 2" converged example-foo example-foo 2
wait_until "$timeout" "after the restart: Foo late (created while down) converged at 2" converged late late 2
wait_until "$timeout" "2 Pods of late Running" running_pods late 2
ok "killed with -9 mid-way, changed while down, restarted: converged"
stop_ctl two
[[ $rc == 0 ]] || fail "SIGTERM: want exit status 0, got $rc; log: $(tail -n 20 "$tmp/two.log")"
ok "SIGTERM: the controller exits 0"

# ---- 5. two replicas with --leader-elect --------------------------------------
start_ctl a --leader-elect
start_ctl b --leader-elect
wait_until "$timeout" "a Lease holder" check "$lease" '.spec.holderIdentity | length > 0' .spec
holder=$(get "$lease" | jq -r .spec.holderIdentity)
leader= standby=
for r in a b; do
	if grep -qF "${holder} acquired the lease" "$tmp/$r.log"; then leader=$r; else standby=$r; fi
done
[[ -n $leader && -n $standby ]] || fail "Lease holder $holder: want exactly one replica that logged acquiring it (a: $(grep -c acquired "$tmp/a.log"), b: $(grep -c acquired "$tmp/b.log"))"
create_foo elected elected 2
wait_until "$timeout" "Foo elected converged under leader $leader" converged elected elected 2
grep -q "$ns/elected: synced" "$tmp/$leader.log" || fail "leader $leader did not log reconciling $ns/elected"
if grep -q ": synced" "$tmp/$standby.log"; then fail "standby $standby reconciled: $(grep ': synced' "$tmp/$standby.log" | head -3)"; fi
curl -sf "http://127.0.0.1:${ports[$standby]}/metrics" | grep -Eq '^controller_runtime_reconcile_total\{controller="sample-controller",result="success"\} [1-9]' &&
	fail "standby $standby counts reconciles in /metrics"
ok "--leader-elect: $leader holds Lease sample-controller/sample-controller ($holder) and alone reconciles; $standby stands by (ready)"
stop_ctl "$leader"
[[ $rc == 0 ]] || fail "leader $leader: SIGTERM exit status $rc"
wait_until "$timeout" "standby $standby takes the released Lease" grep -q "acquired the lease" "$tmp/$standby.log"
scale_foo elected 3
wait_until "$timeout" "Foo elected converged at 3 under the new leader $standby" converged elected elected 3
grep -q "$ns/elected: synced" "$tmp/$standby.log" || fail "new leader $standby did not log reconciling $ns/elected"
ok "leader stopped: $standby took the Lease over and reconciles"

# ---- 6. deleting a Foo garbage-collects its Deployment and Pods ----------------
kcurl d "$foos/example-foo" -X DELETE >/dev/null
expect_code 200 "delete Foo example-foo"
wait_until "$timeout" "Deployment example-foo garbage-collected" gone "$deploys/example-foo"
wait_until "$timeout" "Pods of example-foo garbage-collected" running_pods example-foo 0
check "$deploys/late" '.spec.replicas == 2' >/dev/null || fail "Deployment late was hurt by deleting example-foo"
ok "Foo example-foo deleted: Deployment and Pods garbage-collected"
stop_ctl "$standby"
[[ $rc == 0 ]] || fail "$standby: SIGTERM exit status $rc"
if grep -H -m3 -E 'Forbidden|\b403\b' "$tmp"/*.log; then
	fail "a controller was refused something: rbac.yaml misses a grant (lines above)"
fi
ok "no request of the controller was forbidden under rbac.yaml"
