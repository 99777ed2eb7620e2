# shellcheck shell=bash disable=SC2034
# PKI of the cluster, written with openssl into $RC_PKI (sourced after lib.sh).
# One CA signs everything: the apiserver's and the kubelet's serving certificates and the client
# certificates of admin, the scheduler, the controller-manager, the node and the apiserver's
# kubelet client. The service-account key pair signs pod tokens. Keys are EC P-256 (fast to
# make: the whole PKI takes well under a second).

_rc_key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; chmod 600 "$1"; }

# _rc_cert NAME SUBJECT EXT: a key and a certificate signed by the CA, valid for a year.
_rc_cert() {
  local name=$1 subj=$2 ext=$3
  _rc_key "$RC_PKI/$name.key"
  openssl req -new -key "$RC_PKI/$name.key" -subj "$subj" -out "$RC_PKI/$name.csr" 2>/dev/null
  printf '%b\n' "$ext" >"$RC_PKI/$name.ext"
  openssl x509 -req -in "$RC_PKI/$name.csr" -CA "$RC_PKI/ca.crt" -CAkey "$RC_PKI/ca.key" \
    -CAcreateserial -days 365 -sha256 -extfile "$RC_PKI/$name.ext" -out "$RC_PKI/$name.crt" 2>/dev/null
  rm -f "$RC_PKI/$name.csr" "$RC_PKI/$name.ext"
}

# rc_pki NODE_IP: writes the PKI once (kept across `up`s of the same state directory).
rc_pki() {
  local node_ip=$1
  [[ -f $RC_PKI/.complete ]] && return 0
  mkdir -p "$RC_PKI"; chmod 700 "$RC_PKI"
  _rc_key "$RC_PKI/ca.key"
  openssl req -x509 -new -key "$RC_PKI/ca.key" -subj "/CN=vacuum-realcluster-ca" -days 365 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$RC_PKI/ca.crt" 2>/dev/null
  _rc_key "$RC_PKI/sa.key"
  openssl ec -in "$RC_PKI/sa.key" -pubout -out "$RC_PKI/sa.pub" 2>/dev/null

  local server='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'
  local client='basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  local first_service_ip=${RC_SERVICE_CIDR%.*/*}.1
  _rc_cert apiserver "/CN=kube-apiserver" \
    "$server\nsubjectAltName=IP:127.0.0.1,IP:$first_service_ip,IP:$node_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  _rc_cert kubelet "/CN=$RC_NODE" "$server\nsubjectAltName=IP:$node_ip,DNS:$RC_NODE"
  _rc_cert admin "/O=system:masters/CN=realcluster-admin" "$client"
  _rc_cert scheduler "/CN=system:kube-scheduler" "$client"
  _rc_cert controller-manager "/CN=system:kube-controller-manager" "$client"
  _rc_cert kube-proxy "/CN=system:kube-proxy" "$client"
  _rc_cert node "/O=system:nodes/CN=system:node:$RC_NODE" "$client"
  _rc_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  touch "$RC_PKI/.complete"
}

# rc_kubeconfig NAME CERT SERVER: writes $RC_DIR/NAME.kubeconfig for client certificate CERT.
rc_kubeconfig() {
  local name=$1 cert=$2 server=$3
  cat >"$RC_DIR/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: realcluster
  cluster:
    server: $server
    certificate-authority: $RC_PKI/ca.crt
users:
- name: $name
  user:
    client-certificate: $RC_PKI/$cert.crt
    client-key: $RC_PKI/$cert.key
contexts:
- name: realcluster
  context: {cluster: realcluster, user: $name, namespace: default}
current-context: realcluster
KC
  chmod 600 "$RC_DIR/$name.kubeconfig"
}
