# shellcheck shell=bash disable=SC2154 # dir, pki, api_port, ca_data, free_port... come from start
# Cluster mode of testenv/start (sourced by it, not executed): what a real
# cluster runs besides the apiserver. kube-controller-manager and
# kube-scheduler (same release), and kwok pretending to be the kubelets of
# $KCR_TESTENV_NODES fake Nodes, driven by the Stage files in kwok/stages/.
# Each gets its own client certificate and kubeconfig, talks to the apiserver
# directly (not through the fault proxy) and logs to logs/NAME.log.

cluster_components=(kube-controller-manager kube-scheduler kwok)
# kwok manages exactly the Nodes with this annotation (those start creates).
kwok_node_annotation=kwok.x-k8s.io/node
kwok_node_selector=$kwok_node_annotation=fake

# cluster_certs: client certificates (the users the apiserver's bootstrap
# RBAC knows, and kwok's own) and loopback serving certificates, so that
# healthz can be checked against the testenv CA.
cluster_certs() {
	new_cert controller-manager client-ca /CN=system:kube-controller-manager clientAuth
	new_cert scheduler client-ca /CN=system:kube-scheduler clientAuth
	new_cert kwok client-ca /CN=kcr-testenv-kwok clientAuth
	new_cert controller-manager-serving ca /CN=kube-controller-manager serverAuth DNS:localhost,IP:127.0.0.1
	new_cert scheduler-serving ca /CN=kube-scheduler serverAuth DNS:localhost,IP:127.0.0.1
	chmod 600 "$pki"/*.key
}

# kwok's permissions: what a kubelet does to its Node, its Pods and its Lease,
# plus events. Bound to the user of its client certificate.
kwok_rbac() {
	admin_post /apis/rbac.authorization.k8s.io/v1/clusterroles '{
  "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
  "metadata": {"name": "kcr-testenv-kwok"},
  "rules": [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "update"]},
    {"apiGroups": [""], "resources": ["nodes/status", "pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete", "patch", "update"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}
  ]}'
	admin_post /apis/rbac.authorization.k8s.io/v1/clusterrolebindings '{
  "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
  "metadata": {"name": "kcr-testenv-kwok"},
  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kcr-testenv-kwok"},
  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kcr-testenv-kwok"}]}'
}

# create_node I: Node kcr-testenv-node-I as a kubelet would register it:
# well-known labels, an InternalIP 10.240.0.(I+1) and the pod CIDR
# 10.244.I.0/24 (kwok hands out pod IPs from it). The not-ready taint the
# apiserver adds goes once kwok reports Ready and the node lifecycle
# controller sees it.
create_node() {
	local name=kcr-testenv-node-$1
	admin_post /api/v1/nodes "{
  \"apiVersion\": \"v1\", \"kind\": \"Node\",
  \"metadata\": {\"name\": \"$name\",
    \"annotations\": {\"$kwok_node_annotation\": \"fake\", \"node.alpha.kubernetes.io/ttl\": \"0\"},
    \"labels\": {\"kubernetes.io/hostname\": \"$name\", \"kubernetes.io/os\": \"linux\",
      \"kubernetes.io/arch\": \"amd64\", \"type\": \"kwok\"}},
  \"spec\": {\"podCIDR\": \"10.244.$1.0/24\", \"podCIDRs\": [\"10.244.$1.0/24\"]},
  \"status\": {\"addresses\": [{\"type\": \"InternalIP\", \"address\": \"10.240.0.$(($1 + 1))\"},
    {\"type\": \"Hostname\", \"address\": \"$name\"}]}}"
}

admin_post() { # PATH JSON
	admin_curl -o /dev/null -X POST -H 'Content-Type: application/json' "https://127.0.0.1:$api_port$1" -d "$2"
}
api_get() { admin_curl "https://127.0.0.1:$api_port$1"; }

# Readiness checks (wait_for retries them).
serving_ok() { curl -sSf --cacert "$pki/ca.crt" "https://127.0.0.1:$1$2"; } # PORT PATH
node_ready() {
	api_get "/api/v1/nodes/$1" | jq -e '.status.conditions[]? | select(.type == "Ready" and .status == "True")'
}
node_schedulable() { # Ready, and the node lifecycle controller lifted the not-ready taint
	api_get "/api/v1/nodes/$1" |
		jq -e '[.spec.taints[]?.key | select(startswith("node.kubernetes.io/"))] | length == 0'
}

# cluster_up NODES: start the three components, create the Nodes and wait
# until the cluster works: components healthy, every Node Ready and
# schedulable, the "default" ServiceAccount there.
cluster_up() {
	local nodes=$1 i name stages
	kcm_port=$(free_port)
	sched_port=$(free_port)
	kwok_port=$(free_port)
	write_kubeconfig "$dir/controller-manager.kubeconfig" "https://127.0.0.1:$api_port" "$ca_data" \
		system:kube-controller-manager "$(cert_user controller-manager)"
	write_kubeconfig "$dir/scheduler.kubeconfig" "https://127.0.0.1:$api_port" "$ca_data" \
		system:kube-scheduler "$(cert_user scheduler)"
	write_kubeconfig "$dir/kwok.kubeconfig" "https://127.0.0.1:$api_port" "$ca_data" \
		kcr-testenv-kwok "$(cert_user kwok)"
	kwok_rbac

	log "starting kube-controller-manager on https://127.0.0.1:$kcm_port"
	launch kube-controller-manager \
		--kubeconfig="$dir/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$kcm_port" \
		--tls-cert-file="$pki/controller-manager-serving.crt" --tls-private-key-file="$pki/controller-manager-serving.key" \
		--leader-elect=false --controllers='*' --use-service-account-credentials=true \
		--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
		--cluster-signing-cert-file="$pki/client-ca.crt" --cluster-signing-key-file="$pki/client-ca.key" \
		--cluster-name=kcr-testenv --service-cluster-ip-range=10.96.0.0/16

	log "starting kube-scheduler on https://127.0.0.1:$sched_port"
	launch kube-scheduler \
		--kubeconfig="$dir/scheduler.kubeconfig" \
		--authentication-kubeconfig="$dir/scheduler.kubeconfig" \
		--authorization-kubeconfig="$dir/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$sched_port" \
		--tls-cert-file="$pki/scheduler-serving.crt" --tls-private-key-file="$pki/scheduler-serving.key" \
		--leader-elect=false

	# KWOK_WORKDIR keeps kwok away from a ~/.kwok/kwok.yaml of the user's.
	stages=$(printf '%s,' "$testenv_src"/kwok/stages/*.yaml)
	log "starting kwok (http://127.0.0.1:$kwok_port) for $nodes node(s)"
	mkdir -p "$dir/kwok"
	KWOK_WORKDIR=$dir/kwok launch kwok \
		--kubeconfig="$dir/kwok.kubeconfig" --config="${stages%,}" \
		--manage-nodes-with-annotation-selector="$kwok_node_selector" \
		--node-lease-duration-seconds=40 --cidr=10.244.0.0/16 \
		--server-address="127.0.0.1:$kwok_port"

	for ((i = 0; i < nodes; i++)); do create_node "$i"; done

	# /healthz of the controller-manager includes one check per started
	# controller; the scheduler's /readyz waits for its informers to sync.
	what=/healthz wait_for kube-controller-manager serving_ok "$kcm_port" /healthz
	what=/readyz wait_for kube-scheduler serving_ok "$sched_port" /readyz
	what=/healthz wait_for kwok curl -sSf "http://127.0.0.1:$kwok_port/healthz"
	for ((i = 0; i < nodes; i++)); do
		name=kcr-testenv-node-$i
		what="Node $name Ready" wait_for kwok node_ready "$name"
		what="not-ready taint lifted from Node $name" wait_for kube-controller-manager node_schedulable "$name"
	done
	# The serviceaccount controller creates it; pods need it (the
	# ServiceAccount admission plugin is on in cluster mode).
	what='ServiceAccount "default" in namespace "default"' \
		wait_for kube-controller-manager api_get /api/v1/namespaces/default/serviceaccounts/default
}
