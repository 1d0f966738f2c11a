# shellcheck shell=bash
# Helpers shared by the sample controller's e2e scripts, sourced after
# testenv/tests/lib.sh and kc_load d ... with $ns set (the test's namespace):
# requests to the cluster as the admin of kubeconfig "d", the Foos' and
# Deployments' state, manifests applied as they are.

timeout=${KCR_TESTENV_TEST_TIMEOUT:-90} # seconds per wait
json=(-H 'Content-Type: application/json')
merge=(-H 'Content-Type: application/merge-patch+json')
foos=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/$ns/foos
deploys=/apis/apps/v1/namespaces/$ns/deployments
lease=/apis/coordination.k8s.io/v1/namespaces/sample-controller/leases/sample-controller

# delete_test_objects: the test's namespace and the Lease go, the temporary
# folder too (for an EXIT trap).
delete_test_objects() {
	kcurl d "/api/v1/namespaces/$ns" -X DELETE >/dev/null 2>&1 || true
	kcurl d "$lease" -X DELETE >/dev/null 2>&1 || true
	rm -rf "$tmp"
}

get() { kcurl d "$1" && [[ $(code) == 200 ]]; }
gone() { kcurl d "$1" >/dev/null; [[ $(code) == 404 ]] || { echo "still there (HTTP $(code))"; return 1; }; }
# check PATH JQ: the object at PATH satisfies JQ (prints it when not).
check() {
	local body
	body=$(get "$1") || { echo "GET $1: HTTP $(code)"; return 1; }
	jq -e "$2" <<<"$body" >/dev/null || { jq -c "${3:-.}" <<<"$body" 2>/dev/null || echo "$body"; return 1; }
}
# free_port: a loopback port no socket uses, below the kernel's ephemeral
# range (ip_local_port_range), so an outgoing connection cannot take it
# between this check and the controller's bind (seen: "Address already in use").
free_port() {
	local p lo
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
	((lo > 21000)) || lo=61000
	while :; do
		p=$((20000 + RANDOM % (lo - 20000)))
		[[ -n $(ss -Htan "sport = :$p") ]] || { echo "$p"; return; }
	done
}

# sa_kubeconfig FILE: a kubeconfig for the ServiceAccount of rbac.yaml
# (apply it first), with a token from the TokenRequest API: a controller
# run with it can do only what rbac.yaml grants.
sa_kubeconfig() {
	local token
	token=$(kcurl d /api/v1/namespaces/sample-controller/serviceaccounts/sample-controller/token -X POST "${json[@]}" \
		-d '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}' |
		jq -r .status.token)
	expect_code 201 "token of ServiceAccount sample-controller/sample-controller"
	cat >"$1" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: testenv
		  cluster:
		    server: $(cat "$tmp/d.server")
		    certificate-authority-data: $(base64 -w0 "$tmp/d.ca")
		users:
		- name: sample-controller
		  user:
		    token: $token
		contexts:
		- name: sample-controller
		  context:
		    cluster: testenv
		    user: sample-controller
		    namespace: sample-controller
		current-context: sample-controller
	YAML
}

create_foo() { # NAME DEPLOYMENT REPLICAS
	kcurl d "$foos" -X POST "${json[@]}" -d "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",
		\"metadata\":{\"name\":\"$1\"},\"spec\":{\"deploymentName\":\"$2\",\"replicas\":$3}}" >/dev/null
	expect_code 201 "create Foo $1"
}
scale_foo() { # NAME REPLICAS
	kcurl d "$foos/$1" -X PATCH "${merge[@]}" -d "{\"spec\":{\"replicas\":$2}}" >/dev/null
	expect_code 200 "scale Foo $1 to $2"
}
running_pods() { # FOO N: exactly N Running, Ready Pods of the Foo's Deployment
	check "/api/v1/namespaces/$ns/pods?labelSelector=controller%3D$1" \
		"[.items[] | select(.metadata.deletionTimestamp == null)] | length == $2 and
		 all(.[]; .status.phase == \"Running\" and any(.status.conditions[]?; .type == \"Ready\" and .status == \"True\"))" \
		'[.items[] | [.metadata.name, .status.phase]]'
}
converged() { # FOO DEPLOYMENT N: Deployment at N replicas, N available, Foo status N
	check "$deploys/$2" ".spec.replicas == $3 and .status.availableReplicas == $3" '{spec: .spec.replicas, status}' &&
		check "$foos/$1" ".status.availableReplicas == $3" .status
}

# apply FILE [QUERY]: server-side apply of each document of a manifest, YAML
# as is (what `kubectl apply --server-side` does), QUERY e.g. "&dryRun=All".
apply() {
	local doc kind name dns path
	while IFS= read -r -d '' doc; do
		kind=$(sed -n 's/^kind: *//p' <<<"$doc")
		name=$(sed -n 's/^  name: *//p' <<<"$doc" | head -n1)
		dns=$(sed -n 's/^  namespace: *//p' <<<"$doc" | head -n1)
		case $kind in
		Namespace) path=/api/v1/namespaces/$name ;;
		ServiceAccount) path=/api/v1/namespaces/$dns/serviceaccounts/$name ;;
		ClusterRole | ClusterRoleBinding) path=/apis/rbac.authorization.k8s.io/v1/${kind,,}s/$name ;;
		Role | RoleBinding) path=/apis/rbac.authorization.k8s.io/v1/namespaces/$dns/${kind,,}s/$name ;;
		Deployment) path=/apis/apps/v1/namespaces/$dns/deployments/$name ;;
		StatefulSet) path=/apis/apps/v1/namespaces/$dns/statefulsets/$name ;;
		Service) path=/api/v1/namespaces/$dns/services/$name ;;
		CustomResourceDefinition) path=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name ;;
		*) fail "$1: no path known for kind '$kind'" ;;
		esac
		kcurl d "$path?fieldManager=kcr-sample-e2e${2:-}" -X PATCH \
			-H 'Content-Type: application/apply-patch+yaml' --data-binary "$doc" >/dev/null
		[[ $(code) == 200 || $(code) == 201 ]] || fail "apply $kind $name from $1: HTTP $(cat "$tmp/code")"
	done < <(awk 'BEGIN { RS = "\n---\n" } { printf "%s%c", $0, 0 }' "$1")
}

# install_crd_namespace_rbac: the Foo CRD (waits until Established), the test's
# namespace $ns and manifests/rbac.yaml, as each e2e script starts.
install_crd_namespace_rbac() {
	local crd=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io
	apply "$manifests/crd.yaml"
	wait_until "$timeout" "CRD foos.samplecontroller.k8s.io Established" \
		check "$crd" 'any(.status.conditions[]?; .type == "Established" and .status == "True")' .status
	kcurl d /api/v1/namespaces -X POST "${json[@]}" \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}" >/dev/null
	expect_code 201 "create namespace $ns"
	apply "$manifests/rbac.yaml"
}
