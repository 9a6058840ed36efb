# pki.sh: credentials of the local cluster (sourced by cluster.sh).
#
# One CA signs the apiserver's serving certificate (valid for the host's
# forwarded 127.0.0.1, the control plane's address and the kubernetes Service
# IP, so pods, nodes and the host verify it) and the apiserver's client
# certificate for kubelets. Components and users authenticate with static
# tokens: the admin (system:masters), the controller manager and the scheduler
# (their default RBAC users) and one system:node:NAME per kubelet (Node
# authorizer + NodeRestriction, as on a real cluster).

cert() { # NAME SUBJ [SAN]: key + certificate signed by the CA
  local name="$1" subj="$2" san="${3:-}" ext="$D/pki/$1.ext"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/pki/$name.key" 2>/dev/null
  openssl req -new -key "$D/pki/$name.key" -subj "$subj" -out "$D/pki/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$ext"
  openssl x509 -req -in "$D/pki/$name.csr" -CA "$D/pki/ca.crt" -CAkey "$D/pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$ext" -out "$D/pki/$name.crt" 2>/dev/null
  rm -f "$D/pki/$name.csr" "$ext"
}

pki() {
  mkdir -p "$D/pki"
  [ -f "$D/pki/ca.crt" ] && return 0
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$D/pki/ca.key" -subj "/CN=switchyard-local-ca" -days 30 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$D/pki/ca.crt" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,$(sans),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$D/pki/sa.key" 2>/dev/null
  openssl pkey -in "$D/pki/sa.key" -pubout -out "$D/pki/sa.pub" 2>/dev/null
  tokens
  chmod 600 "$D"/pki/*.key "$D/pki/tokens.csv"
}

# sans: the apiserver's addresses in the cluster's families (control plane,
# kubernetes Service) as subjectAltName entries.
sans() {
  local ips f
  ips="$(for f in $(families); do cp_ip "$f"; done; echo "$KUBERNETES_SVC_IPS" | tr , '\n')"
  echo "$ips" | sed 's/^/IP:/' | paste -sd,
}

token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

tokens() {
  local n
  {
    printf '%s,admin,admin,"system:masters"\n' "$(token)"
    printf '%s,system:kube-controller-manager,kcm\n' "$(token)"
    printf '%s,system:kube-scheduler,scheduler\n' "$(token)"
    for n in $(seq "$NODES"); do
      printf '%s,system:node:%s,node%s,"system:nodes"\n' "$(token)" "$(node_name "$n")" "$n"
    done
  } >"$D/pki/tokens.csv"
}

# kubeconfig FILE USER SERVER: a kubeconfig with USER's static token.
kubeconfig() {
  local tok
  tok="$(awk -F, -v u="$2" '$2==u{print $1}' "$D/pki/tokens.csv")"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: switchyard-local
  cluster:
    server: $3
    certificate-authority: $D/pki/ca.crt
users:
- name: $2
  user:
    token: $tok
contexts:
- name: switchyard-local
  context: {cluster: switchyard-local, user: $2}
current-context: switchyard-local
EOF
  chmod 600 "$1"
}
