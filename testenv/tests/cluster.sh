#!/usr/bin/env bash
# Cluster mode (testenv/start --cluster): the controllers, the scheduler and
# kwok's fake kubelets work together as in a real cluster. A plain Deployment
# of 3 replicas becomes available with its Pods Running and Ready on a kwok
# Node; deleting it (propagation Background) garbage-collects its ReplicaSet
# and Pods; deleting a namespace with objects in it completes.
# shellcheck source=SCRIPTDIR/lib.sh
source "$(dirname "$0")/lib.sh"

[[ ${KCR_TESTENV_CLUSTER:-} == 1 ]] ||
	fail "needs a testenv in cluster mode (no KCR_TESTENV_CLUSTER=1 in $KCR_TESTENV_DIR/env): run testenv/stop; testenv/start --cluster"
kc_load d "$KCR_TESTENV_KUBECONFIG"
timeout=${KCR_TESTENV_TEST_TIMEOUT:-60} # seconds for each step
ns=kcr-cluster-test-$$
trap 'kcurl d "/api/v1/namespaces/$ns" -X DELETE >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
json=(-H 'Content-Type: application/json')

# get PATH: the object or list at PATH (fails unless 200).
get() { kcurl d "$1" && [[ $(code) == 200 ]]; }
gone() { kcurl d "$1" >/dev/null; [[ $(code) == 404 ]] || { echo "still there (HTTP $(code))"; return 1; }; }
# count_items PATH: how many items the list at PATH holds.
count_items() { get "$1" | jq '.items | length'; }
none_left() { local n; n=$(count_items "$1") && { [[ $n == 0 ]] || { echo "$n left"; return 1; }; }; }

# ---- the Nodes ---------------------------------------------------------------
nodes=$(get /api/v1/nodes) || fail "list nodes: HTTP $(code)"
jq -e --argjson n "${KCR_TESTENV_NODES:-1}" '[.items[] | select(.metadata.annotations["kwok.x-k8s.io/node"] == "fake")
	| select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length == $n' <<<"$nodes" >/dev/null ||
	fail "want ${KCR_TESTENV_NODES:-1} Ready kwok Node(s): $(jq -c '[.items[] | {name: .metadata.name, conditions: .status.conditions}]' <<<"$nodes")"
ok "$(jq '.items | length' <<<"$nodes") kwok Node(s) Ready"

# ---- a Deployment becomes available ------------------------------------------
kcurl d /api/v1/namespaces -X POST "${json[@]}" \
	-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
expect_code 201 "create namespace $ns"
deploy=/apis/apps/v1/namespaces/$ns/deployments
kcurl d "$deploy" -X POST "${json[@]}" -d '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
    "template": {"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "web", "image": "registry.invalid/kcr/web:1"}]}}}}' >/dev/null
expect_code 201 "create deployment web"

available() { # prints the status while it is not there yet
	local body
	body=$(get "$deploy/web") && jq -e '.status.availableReplicas == 3' <<<"$body" >/dev/null ||
		{ jq -c .status <<<"$body"; return 1; }
}
wait_until "$timeout" "Deployment web: status.availableReplicas == 3" available
ok "Deployment web: 3 replicas available"

pods=$(get "/api/v1/namespaces/$ns/pods?labelSelector=app%3Dweb") || fail "list pods: HTTP $(code)"
jq -e --argjson nodes "$nodes" '
	($nodes.items | map(select(.metadata.annotations["kwok.x-k8s.io/node"] == "fake") | .metadata.name)) as $kwok
	| (.items | length == 3) and all(.items[];
		.status.phase == "Running" and (.spec.nodeName as $n | $kwok | index($n)) != null
		and (.status.podIP | length > 0)
		and any(.status.conditions[]; .type == "Ready" and .status == "True")
		and all(.status.containerStatuses[]; .ready and .state.running != null)
		and (.metadata.ownerReferences[0].kind == "ReplicaSet"))' <<<"$pods" >/dev/null ||
	fail "want 3 Running, Ready pods on kwok nodes owned by a ReplicaSet: $(jq -c '[.items[] | {name: .metadata.name,
		node: .spec.nodeName, phase: .status.phase, podIP: .status.podIP, conditions: .status.conditions}]' <<<"$pods")"
ok "its Pods are Running and Ready on kwok nodes: $(jq -c '[.items[] | [.metadata.name, .spec.nodeName, .status.podIP]]' <<<"$pods")"
rs=$(jq -r '.items[0].metadata.ownerReferences[0].name' <<<"$pods")
get "/apis/apps/v1/namespaces/$ns/replicasets/$rs" | jq -e '.metadata.ownerReferences[0].name == "web"' >/dev/null ||
	fail "ReplicaSet $rs is not owned by Deployment web"

# ---- deleting it garbage-collects the ReplicaSet and the Pods ----------------
kcurl d "$deploy/web" -X DELETE "${json[@]}" -d '{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}' >/dev/null
expect_code 200 "delete deployment web (Background)"
wait_until "$timeout" "Deployment web deleted" gone "$deploy/web"
wait_until "$timeout" "ReplicaSet $rs garbage-collected" gone "/apis/apps/v1/namespaces/$ns/replicasets/$rs"
wait_until "$timeout" "Pods of web garbage-collected" none_left "/api/v1/namespaces/$ns/pods?labelSelector=app%3Dweb"
ok "deleting Deployment web removed ReplicaSet $rs and its Pods"

# ---- a namespace with objects in it deletes --------------------------------
kcurl d "/api/v1/namespaces/$ns/configmaps" -X POST "${json[@]}" \
	-d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"left-behind"},"data":{"k":"v"}}' >/dev/null
expect_code 201 "create configmap"
kcurl d "$deploy" -X POST "${json[@]}" -d '{
  "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "one"},
  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "one"}},
    "template": {"metadata": {"labels": {"app": "one"}},
      "spec": {"containers": [{"name": "one", "image": "registry.invalid/kcr/one:1"}]}}}}' >/dev/null
expect_code 201 "create deployment one"
one_running() {
	none_left "/api/v1/namespaces/$ns/pods?fieldSelector=status.phase%21%3DRunning" &&
		[[ $(count_items "/api/v1/namespaces/$ns/pods") == 1 ]]
}
wait_until "$timeout" "Deployment one: a Running Pod" one_running
kcurl d "/api/v1/namespaces/$ns" -X DELETE >/dev/null
expect_code 200 "delete namespace $ns"
wait_until "$timeout" "namespace $ns deleted (its Deployment, Pod and ConfigMap removed)" gone "/api/v1/namespaces/$ns"
ok "namespace $ns with a Deployment, a running Pod and a ConfigMap deleted"
echo "cluster: all checks passed"
