#!/usr/bin/env bash
# The sample controller on a real kind cluster, as docs/sample-controller.md
# ("On kind") tells a user to run it, from an offline build (testenv/kind):
#
#   kind.sh PATH/TO/sample-controller PATH/TO/kcr-webhook-certs   (host builds)
#
# 1. testenv/kind/create-cluster: kcr's node image (built on first use),
#    kind create cluster; the Node is Ready;
# 2. the controller's image (testenv/kind/sample-image: docker build of
#    examples/sample-controller/Dockerfile), kind load docker-image;
# 3. a local registry (testenv/kind/registry) serving a stand-in for the
#    nginx:latest the Foo's Pods run (nothing can be pulled here; :latest is
#    pulled on every start): pause, which serves nothing but runs;
# 4. crd.yaml, rbac.yaml, deployment.yaml: two replicas Ready (probes), one
#    holds the Lease;
# 5. example-foo: its Deployment's Pods Running and Ready on the kubelet,
#    Foo status; scaled to 3; the leader's Pod deleted: another replica
#    takes the Lease and reconciles a scale to 2; /metrics of the leader,
#    fetched from a Pod over the Pod network, counts the reconciles;
#    deleting the Foo garbage-collects the Deployment and its Pods;
# 6. the webhooks of docs/webhooks.md ("On kind"): a Secret from
#    kcr-webhook-certs, the Service, the Deployment patched to serve them,
#    the two-version CRD and the webhook configurations with the caBundle;
#    a Foo with replicas 42 refused with the webhook's message, one without
#    replicas stored with 1 and read as v1beta1; then the webhook
#    configurations deleted and crd.yaml applied again;
# 7. deployment.yaml deleted; examples/sample-controller/tests/e2e.sh on
#    the same cluster through testenv/adopt, unchanged;
# 8. the cluster and the registry are deleted (also on failure; set
#    KCR_KIND_KEEP=1 to keep them for a look).
# Every wait is bounded (KCR_KIND_TIMEOUT seconds per step, default 180).
set -euo pipefail
test_name=sample-controller-kind
fail() { printf 'FAIL %s: %s\n' "$test_name" "$*" >&2; exit 1; }
ok() { printf 'ok   %s: %s\n' "$test_name" "$*"; }
root=$(cd "$(dirname "$0")/../../.." && pwd)
kind_dir=$root/testenv/kind
manifests=$root/examples/sample-controller/manifests
bin=${1:-}
certs_bin=${2:-}
[[ -x $bin && -x $certs_bin ]] ||
	fail "usage: $0 PATH/TO/sample-controller PATH/TO/kcr-webhook-certs (build them: ninja -C build sample-controller kcr-webhook-certs)"
command -v docker >/dev/null || fail "docker not found: the kind test needs a Docker engine"
docker info >/dev/null 2>&1 || fail "the Docker engine does not answer (docker info failed)"
cluster=${KCR_KIND_CLUSTER:-kcr-e2e}
timeout=${KCR_KIND_TIMEOUT:-180}
tmp=$(mktemp -d)
export KCR_KIND_KUBECONFIG=$tmp/kubeconfig KUBECONFIG=$tmp/kubeconfig

cleanup() {
	local rc=$?
	if ((rc != 0)) && [[ -s $KUBECONFIG ]]; then
		echo "--- state at the failure:" >&2
		kubectl get pods -A -o wide >&2 2>&1 || true
		kubectl -n sample-controller logs -l app.kubernetes.io/name=sample-controller --prefix --tail 20 >&2 2>&1 || true
	fi
	if [[ ${KCR_KIND_KEEP:-} == 1 ]]; then
		echo "kept cluster $cluster (KUBECONFIG=$KUBECONFIG): testenv/kind/delete-cluster $cluster; testenv/kind/registry stop $cluster" >&2
	else
		"$kind_dir/registry" stop "$cluster" 2>/dev/null || true
		"$kind_dir/delete-cluster" "$cluster" 2>/dev/null || true
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT

# wait_until WHAT CMD...: retry CMD every second until it succeeds, at most $timeout s.
wait_until() {
	local what=$1 deadline=$((SECONDS + timeout)) out
	shift
	until out=$("$@" 2>&1); do
		((SECONDS < deadline)) || fail "$what: not within ${timeout}s (last: ${out:0:600})"
		sleep 1
	done
}
jsonpath() { kubectl "${@:2}" -o "jsonpath=$1"; }

# ---- 1. the cluster -----------------------------------------------------------
bins=$("$kind_dir/node-bins") # kubectl among them
PATH=$bins:$PATH
start=$SECONDS
"$kind_dir/create-cluster" "$cluster" >/dev/null
kubectl wait --for condition=Ready node --all --timeout "${timeout}s" >/dev/null
ok "kind cluster $cluster ($(jsonpath '{.items[0].status.nodeInfo.kubeletVersion}' get nodes), $(jsonpath '{.items[0].status.nodeInfo.containerRuntimeVersion}' get nodes)) Ready in $((SECONDS - start))s"

# ---- 2. the controller's image ------------------------------------------------
start=$SECONDS
"$kind_dir/sample-image" sample-controller:latest >/dev/null
"$kind_dir/kind" load docker-image sample-controller:latest --name "$cluster" >/dev/null
ok "image sample-controller:latest built and loaded in $((SECONDS - start))s"

# ---- 3. a stand-in for nginx:latest in a local registry -----------------------
standin=kcr/nginx-standin:$$
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$tmp/Dockerfile"
cp "$bins/pause" "$tmp/pause"
docker build -q -t "$standin" "$tmp" >/dev/null
"$kind_dir/registry" start "$cluster" >/dev/null
"$kind_dir/registry" push "$cluster" "$standin" nginx:latest 2>/dev/null
docker rmi "$standin" >/dev/null
ok "registry kcr-registry-$cluster serves the stand-in for nginx:latest"

# ---- 4. the documented steps: CRD, RBAC, the controller's Deployment ----------
kubectl apply -f "$manifests/crd.yaml" >/dev/null
kubectl wait --for condition=established crd/foos.samplecontroller.k8s.io --timeout "${timeout}s" >/dev/null
kubectl apply -f "$manifests/rbac.yaml" >/dev/null
kubectl apply -f "$manifests/deployment.yaml" >/dev/null
kubectl -n sample-controller rollout status deployment/sample-controller --timeout "${timeout}s" >/dev/null ||
	fail "deployment sample-controller did not roll out"
holder() { jsonpath '{.spec.holderIdentity}' -n sample-controller get lease sample-controller; }
wait_until "Lease sample-controller held" holder
leader=$(holder)
leader=${leader%%_*} # identity: <hostname (the Pod's name)>_<uuid>
mapfile -t replicas < <(kubectl -n sample-controller get pods -l app.kubernetes.io/name=sample-controller -o name)
((${#replicas[@]} == 2)) || fail "want 2 controller Pods, got ${#replicas[@]}: ${replicas[*]}"
standby=
for p in "${replicas[@]}"; do [[ ${p#pod/} == "$leader" ]] || standby=${p#pod/}; done
[[ -n $standby && $standby != "$leader" ]] || fail "Lease holder $leader is not one of ${replicas[*]}"
ok "2 replicas Ready (readiness probe), $leader holds the Lease, $standby stands by"

# ---- 5. a Foo ----------------------------------------------------------------
kubectl apply -f "$manifests/example-foo.yaml" >/dev/null
wait_until "Deployment example-foo created" kubectl get deployment example-foo
[[ $(jsonpath '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}' get deployment example-foo) == Foo/example-foo ]] ||
	fail "Deployment example-foo is not controlled by Foo example-foo"
pods_ready() { # N: exactly N Running and Ready Pods of example-foo
	local out
	out=$(kubectl get pods -l controller=example-foo -o json | jq -e --argjson n "$1" \
		'[.items[] | select(.metadata.deletionTimestamp == null)] | length == $n and
		 all(.[]; .status.phase == "Running" and any(.status.conditions[]; .type == "Ready" and .status == "True"))') ||
		{ kubectl get pods -l controller=example-foo --no-headers; return 1; }
}
foo_status() { [[ $(jsonpath '{.status.availableReplicas}' get foo example-foo) == "$1" ]]; }
wait_until "1 Pod of example-foo Running and Ready" pods_ready 1
wait_until "Foo example-foo status.availableReplicas 1" foo_status 1
ok "Foo example-foo: Deployment controlled by it, its Pod Running and Ready on the kubelet, status 1"
kubectl patch foo example-foo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
wait_until "3 Pods of example-foo Running and Ready" pods_ready 3
wait_until "Foo example-foo status.availableReplicas 3" foo_status 3
ok "scaled to 3: Deployment 3/3, Foo status 3"

kubectl -n sample-controller delete pod "$leader" --wait=false >/dev/null
# The Deployment replaces the deleted Pod at once, so two candidates wait
# for the released Lease: the standby and the replacement. Either may win
# (seen here: the replacement did); the old leader must not hold it.
new_holder() {
	local h
	h=$(holder)
	[[ -n $h && ${h%%_*} != "$leader" ]] && kubectl -n sample-controller get pod "${h%%_*}" >/dev/null 2>&1 ||
		{ echo "holder: $h"; return 1; }
}
wait_until "another replica than $leader takes the Lease" new_holder
new_leader=$(holder)
new_leader=${new_leader%%_*}
kubectl patch foo example-foo --type merge -p '{"spec":{"replicas":2}}' >/dev/null
wait_until "2 Pods of example-foo Running and Ready under the new leader" pods_ready 2
wait_until "Foo example-foo status.availableReplicas 2" foo_status 2
grep -q 'default/example-foo: synced' <<<"$(kubectl -n sample-controller logs "$new_leader")" ||
	fail "the new leader $new_leader did not log reconciling default/example-foo"
ok "leader Pod $leader deleted: $new_leader ($([[ $new_leader == "$standby" ]] && echo the standby || echo its replacement)) took the Lease and reconciled the scale to 2"

ip=$(jsonpath '{.status.podIP}' -n sample-controller get pod "$new_leader")
probe_image=$(docker images --format '{{.Repository}}:{{.Tag}}' kcr/kind-userland | head -n1) # has curl
"$kind_dir/kind" load docker-image "$probe_image" --name "$cluster" >/dev/null
kubectl run metrics-probe --image "$probe_image" --restart Never --command -- curl -sf "http://$ip:8080/metrics" >/dev/null
probe_done() { [[ $(jsonpath '{.status.phase}' get pod metrics-probe) == Succeeded ]]; }
wait_until "Pod metrics-probe fetched /metrics" probe_done
metrics=$(kubectl logs metrics-probe)
kubectl delete pod metrics-probe --wait=false >/dev/null
grep -Eq '^controller_runtime_reconcile_total\{controller="sample-controller",result="success"\} [1-9]' <<<"$metrics" ||
	fail "/metrics of $new_leader counts no successful reconcile: $(grep reconcile_total <<<"$metrics")"
ok "/metrics of the leader $new_leader, fetched from a Pod over the Pod network, counts successful reconciles"

kubectl delete foo example-foo >/dev/null
gone() { ! kubectl get deployment example-foo >/dev/null 2>&1 && [[ -z $(kubectl get pods -l controller=example-foo -o name) ]]; }
wait_until "Deployment example-foo and its Pods garbage-collected" gone
ok "Foo deleted: its Deployment and Pods garbage-collected"

# ---- 6. the webhooks, as docs/webhooks.md ("On kind") tells -------------------
certs=$tmp/certs
ca=$("$certs_bin" "$certs" sample-controller-webhook.sample-controller.svc)
kubectl -n sample-controller create secret tls sample-controller-webhook-tls \
	--cert="$certs/tls.crt" --key="$certs/tls.key" >/dev/null
kubectl apply -f "$manifests/webhooks/service.yaml" >/dev/null
kubectl -n sample-controller patch deployment sample-controller \
	--patch-file "$manifests/webhooks/deployment-patch.yaml" >/dev/null
kubectl -n sample-controller rollout status deployment/sample-controller --timeout "${timeout}s" >/dev/null ||
	fail "deployment sample-controller did not roll out with its webhooks"
sed "s|CA_BUNDLE|$ca|" "$manifests/webhooks/crd.yaml" | kubectl apply -f - >/dev/null
sed "s|CA_BUNDLE|$ca|" "$manifests/webhooks/webhook-configurations.yaml" | kubectl apply -f - >/dev/null
kubectl wait --for condition=established crd/foos.samplecontroller.k8s.io --timeout "${timeout}s" >/dev/null
ok "webhooks served by both replicas behind Service sample-controller-webhook (Secret from kcr-webhook-certs)"

too_big='{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"too-big"},"spec":{"deploymentName":"too-big","replicas":42}}'
refused() { # the validating webhook answers (until the Service has endpoints the apiserver says it cannot call it)
	local out
	if out=$(kubectl create -f - <<<"$too_big" 2>&1); then
		kubectl delete foo too-big --wait=false >/dev/null 2>&1
		fail "a Foo with replicas 42 was stored: $out"
	fi
	grep -q 'denied the request: spec.replicas must be an integer from 0 to 10' <<<"$out" || { echo "$out"; return 1; }
}
wait_until "the validating webhook refuses a Foo with replicas 42" refused
ok "a Foo with replicas 42 refused with the webhook's message"

kubectl create -f - >/dev/null <<<'{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"defaulted"},"spec":{"deploymentName":"defaulted"}}'
[[ $(jsonpath '{.spec.replicas}' get foo defaulted) == 1 ]] ||
	fail "a Foo without replicas was stored with replicas '$(jsonpath '{.spec.replicas}' get foo defaulted)', want 1"
[[ $(jsonpath '{.spec.deploymentRef}' get foos.v1beta1.samplecontroller.k8s.io defaulted) == defaulted ]] ||
	fail "Foo defaulted read as v1beta1: $(kubectl get foos.v1beta1.samplecontroller.k8s.io defaulted -o jsonpath='{.spec}')"
wait_until "1 Pod of Foo defaulted Running and Ready" \
	sh -c "kubectl get pods -l controller=defaulted -o jsonpath='{.items[*].status.phase}' | grep -qx Running"
ok "a Foo without replicas stored with replicas 1 (mutating webhook), read as v1beta1 through the conversion webhook, reconciled"

kubectl delete foo defaulted >/dev/null
sed "s|CA_BUNDLE|$ca|" "$manifests/webhooks/webhook-configurations.yaml" | kubectl delete -f - >/dev/null
kubectl apply -f "$manifests/crd.yaml" >/dev/null # the one-version CRD again, no conversion webhook

# ---- 7. the testenv cluster-mode e2e suite, unchanged, on this cluster -------
kubectl delete -f "$manifests/deployment.yaml" --wait=true --timeout "${timeout}s" >/dev/null
kubectl -n sample-controller wait --for delete pod -l app.kubernetes.io/name=sample-controller --timeout "${timeout}s" >/dev/null
KCR_TESTENV_DIR=$tmp/adopted "$root/testenv/adopt" "$KUBECONFIG" >/dev/null
KCR_TESTENV_DIR=$tmp/adopted KCR_TESTENV_TEST_TIMEOUT=$timeout "$root/examples/sample-controller/tests/e2e.sh" "$bin" ||
	fail "examples/sample-controller/tests/e2e.sh failed on the kind cluster"
ok "examples/sample-controller/tests/e2e.sh passed on the kind cluster (testenv/adopt)"
