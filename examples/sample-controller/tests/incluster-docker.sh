#!/usr/bin/env bash
# The sample controller's image, run as containers on the Docker engine
# against testenv cluster mode, with what a kubelet gives a Pod: the
# ServiceAccount token (from the TokenRequest API), the CA and the namespace
# mounted at /var/run/secrets/kubernetes.io/serviceaccount, and
# KUBERNETES_SERVICE_HOST/PORT: the in-cluster path, without kind.
#
#   incluster-docker.sh [IMAGE]      (default: testenv/kind/sample-image builds
#                                     sample-controller:latest from this tree)
#
# The containers run as deployment.yaml runs them (uid 65532, read-only root,
# no capabilities, no privilege escalation), on the host's network (the
# testenv apiserver listens on loopback). Checks: both replicas become ready;
# one holds the Lease and alone reconciles a Foo (its Deployment, Pods on
# kwok, status); stopping the leader's container (docker stop: SIGTERM, exit
# 0) hands the Lease over and the other replica reconciles a scale; /metrics
# counts the reconciles; deleting the Foo garbage-collects the Deployment;
# nothing was forbidden under rbac.yaml. Every container, the namespace and
# the Lease are removed on exit.
# shellcheck source=../../../testenv/tests/lib.sh
source "$(dirname "$0")/../../../testenv/tests/lib.sh"
test_name=sample-controller-incluster-docker
manifests=$(cd "$(dirname "$0")/../manifests" && pwd)
command -v docker >/dev/null || fail "docker not found (this test runs the controller's image on the Docker engine)"
docker info >/dev/null 2>&1 || fail "the Docker engine does not answer (docker info failed)"
image=${1:-$("$testenv_src/kind/sample-image")} || fail "building the image failed (testenv/kind/sample-image)"
docker image inspect "$image" >/dev/null 2>&1 || fail "no image $image"
[[ ${KCR_TESTENV_CLUSTER:-} == 1 ]] ||
	fail "needs testenv cluster mode in $KCR_TESTENV_DIR (kube-controller-manager, kwok's Nodes): testenv/start --cluster"
kc_load d "$KCR_TESTENV_KUBECONFIG"
ns=kcr-sample-docker-$$ # the test's own namespace
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

declare -A containers ports
cleanup() {
	local rc=$? r
	for r in "${!containers[@]}"; do
		if ((rc != 0)); then
			echo "--- last lines of container $r's log:" >&2
			docker logs --tail 15 "${containers[$r]}" >&2 2>&1 || true
		fi
		docker rm -f "${containers[$r]}" >/dev/null 2>&1 || true
	done
	delete_test_objects
}
trap cleanup EXIT

# ---- the CRD, RBAC, the ServiceAccount's token as a kubelet mounts it ---------
install_crd_namespace_rbac
sa=$tmp/serviceaccount # world-readable, as a projected volume is to uid 65532
mkdir -p "$sa"
kcurl d /api/v1/namespaces/sample-controller/serviceaccounts/sample-controller/token -X POST "${json[@]}" \
	-d '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}' |
	jq -r .status.token >"$sa/token"
expect_code 201 "TokenRequest for ServiceAccount sample-controller/sample-controller"
cp "$tmp/d.ca" "$sa/ca.crt"
printf sample-controller >"$sa/namespace"
chmod 755 "$tmp" "$sa" && chmod 644 "$sa"/*
server=$(cat "$tmp/d.server")
hostport=${server#https://}
host=${hostport%:*} port=${hostport##*:}
kcurl d "$lease" -X DELETE >/dev/null # a Lease left by an earlier run would delay the election
ok "CRD established, RBAC of rbac.yaml applied, token from the TokenRequest API mounted with ca.crt and namespace"

# start_replica NAME: a container of the image, as deployment.yaml's Pod runs
# it, waiting for /readyz.
start_replica() {
	local r=$1
	ports[$r]=$(free_port)
	containers[$r]=$(docker run -d --name "kcr-sample-$r-$$" --network host \
		--user 65532:65532 --read-only --cap-drop ALL --security-opt no-new-privileges \
		-v "$sa:/var/run/secrets/kubernetes.io/serviceaccount:ro" \
		-e "KUBERNETES_SERVICE_HOST=$host" -e "KUBERNETES_SERVICE_PORT=$port" \
		"$image" --leader-elect --namespace "$ns" \
		--metrics-bind-address "127.0.0.1:${ports[$r]}" \
		--health-probe-bind-address "127.0.0.1:${ports[$r]}") ||
		fail "docker run of $image failed"
	wait_until "$timeout" "replica $r ready (/readyz)" ready "$r"
}
ready() {
	[[ $(docker inspect -f '{{.State.Running}}' "${containers[$1]}") == true ]] ||
		{ echo "exited: $(docker logs --tail 20 "${containers[$1]}" 2>&1)"; return 1; }
	curl -sf "http://127.0.0.1:${ports[$1]}/readyz"
}
logs() { docker logs "${containers[$1]}" 2>&1; }
reconciled() { # REPLICA: its /metrics count successful reconciles
	local metrics
	metrics=$(curl -sf "http://127.0.0.1:${ports[$1]}/metrics") || return 1
	grep -Eq '^controller_runtime_reconcile_total\{controller="sample-controller",result="success"\} [1-9]' <<<"$metrics"
}
# ---- two replicas: one leader reconciles ---------------------------------------
start_replica a
start_replica b
wait_until "$timeout" "a Lease holder" check "$lease" '.spec.holderIdentity | length > 0' .spec
holder=$(get "$lease" | jq -r .spec.holderIdentity)
leader= standby=
for r in a b; do
	if grep -qF "${holder} acquired the lease" <<<"$(logs "$r")"; then leader=$r; else standby=$r; fi
done
[[ -n $leader && -n $standby ]] || fail "Lease holder $holder: want exactly one replica that logged acquiring it"
create_foo example-foo example-foo 2
wait_until "$timeout" "Foo example-foo converged at 2 under leader $leader" converged example-foo example-foo 2
wait_until "$timeout" "2 Pods of example-foo Running and Ready" running_pods example-foo 2
check "$deploys/example-foo" '.metadata.ownerReferences[0] | .kind == "Foo" and .name == "example-foo" and .controller' \
	.metadata.ownerReferences >/dev/null || fail "Deployment example-foo is not controlled by Foo example-foo"
grep -q "$ns/example-foo: synced" <<<"$(logs "$leader")" || fail "leader $leader did not log reconciling $ns/example-foo"
if grep -q ": synced" <<<"$(logs "$standby")"; then fail "standby $standby reconciled"; fi
reconciled "$leader" || fail "leader $leader's /metrics counts no successful reconcile"
if reconciled "$standby"; then fail "standby $standby's /metrics counts reconciles"; fi
ok "in-cluster config: $leader holds the Lease ($holder) and alone reconciles Foo example-foo (2 Pods Running); $standby stands by"

# ---- the leader's container stops: the standby takes over ----------------------
docker stop -t 40 "${containers[$leader]}" >/dev/null
rc=$(docker inspect -f '{{.State.ExitCode}}' "${containers[$leader]}")
[[ $rc == 0 ]] || fail "leader $leader: docker stop (SIGTERM) exit status $rc"
wait_until "$timeout" "standby $standby takes the released Lease" sh -c "docker logs ${containers[$standby]} 2>&1 | grep -q 'acquired the lease'"
scale_foo example-foo 3
wait_until "$timeout" "Foo example-foo converged at 3 under the new leader $standby" converged example-foo example-foo 3
wait_until "$timeout" "new leader $standby's /metrics counts reconciles" reconciled "$standby"
ok "leader's container stopped (exit 0): $standby took the Lease and reconciled the scale to 3"

# ---- deleting the Foo garbage-collects its Deployment --------------------------
kcurl d "$foos/example-foo" -X DELETE >/dev/null
expect_code 200 "delete Foo example-foo"
wait_until "$timeout" "Deployment example-foo garbage-collected" gone "$deploys/example-foo"
docker stop -t 40 "${containers[$standby]}" >/dev/null
rc=$(docker inspect -f '{{.State.ExitCode}}' "${containers[$standby]}")
[[ $rc == 0 ]] || fail "$standby: docker stop (SIGTERM) exit status $rc"
for r in a b; do
	if logs "$r" | grep -m3 -E 'Forbidden|\b403\b'; then fail "replica $r was refused something: rbac.yaml misses a grant"; fi
done
ok "Foo deleted: Deployment garbage-collected; both containers exited 0; nothing forbidden"
