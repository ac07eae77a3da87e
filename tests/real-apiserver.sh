#!/usr/bin/env bash
# A real kube-apiserver + etcd on loopback, built from the Go module proxy (no prebuilt downloads).
# Verified on this machine kind: etcd v3.6.17 builds in ~1.5 min, kube-apiserver v1.36.3 in ~4 min (2 cores,
# empty Go cache); kube-apiserver is ready 3-5 s after start.
#
#   real-apiserver.sh build                 # -> $BASE/bin/{etcd,kube-apiserver} (skips what exists)
#   real-apiserver.sh start N API_PORT      # etcd + kube-apiserver #N; writes $BASE/runN/kubeconfig (admin token)
#   real-apiserver.sh stop N                # SIGTERM, SIGKILL after 10 s (kube-apiserver may take ~60 s otherwise)
#   real-apiserver.sh pki DIR               # only the certificates, keys and admin token, into DIR
#
# tests/run.sh runs `build` before the tests, which then start their own instances from $BASE/bin
# (engine/cli/tests/real_engine.rs) with the same flags as `start`.
# BASE defaults to target/real-apiserver in this repository. Ports: etcd client 23790+N*10, peer +1.
# Notes: list responses of kube-apiserver omit apiVersion/kind on items of built-in types (unlike `flotilla up`);
# --endpoint-reconciler-type=none avoids a loopback-endpoint error loop.
set -euo pipefail
BASE=${BASE:-$(cd "$(dirname "$0")/.." && pwd)/target/real-apiserver}
ETCD_V=${ETCD_V:-v3.6.17}; K8S_V=${K8S_V:-v1.36.3}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

build() {
  mkdir -p "$BASE/bin" "$BASE/etcdbuild" "$BASE/k8sbuild"
  if [ ! -x "$BASE/bin/etcd" ]; then
    (cd "$BASE/etcdbuild"
     printf 'module kapi/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_V" > go.mod
     printf '//go:build tools\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
     go mod tidy && go build -trimpath -ldflags='-s -w' -o "$BASE/bin/etcd" go.etcd.io/etcd/server/v3)
  fi
  if [ ! -x "$BASE/bin/kube-apiserver" ]; then
    (cd "$BASE/k8sbuild"
     go mod download -json "k8s.io/kubernetes@$K8S_V" > /dev/null
     kmod=$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_V/go.mod; sv=v0.${K8S_V#v1.}; minor=$(echo "$K8S_V" | cut -d. -f2)
     { printf 'module kapi/k8sbuild\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_V"
       grep -E '^\s+k8s\.io/[^ ]+ v0\.0\.0( |$)' "$kmod" | awk -v sv="$sv" '{print "\t"$1" => "$1" "sv}'
       printf ')\n'; } > go.mod
     printf '//go:build tools\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' > tools.go
     go mod tidy
     ld="-s -w"
     for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
       ld="$ld -X $p.gitVersion=$K8S_V -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
     done
     go build -trimpath -ldflags="$ld" -o "$BASE/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  fi
}

pki() {  # CA, serving cert for 127.0.0.1/localhost, service-account key pair, admin token file
  local d=$1; mkdir -p "$d"; cd "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 365 -subj "/CN=real-apiserver-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > ext.cnf
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 365 -extfile ext.cnf 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  local t; t=$(openssl rand -hex 16); echo "$t,admin,admin,system:masters" > tokens.csv; echo "$t" > token
  chmod 600 ./*.key tokens.csv token; cd - >/dev/null
}

start() {
  local n=$1 ap=$2 ec=$((23790 + $1 * 10)); local ep=$((ec + 1)) r="$BASE/run$1"; local p="$r/pki"
  mkdir -p "$r"; [ -f "$p/token" ] || pki "$p"
  "$BASE/bin/etcd" --name "e$n" --data-dir "$r/etcd" --listen-client-urls "http://127.0.0.1:$ec" \
    --advertise-client-urls "http://127.0.0.1:$ec" --listen-peer-urls "http://127.0.0.1:$ep" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ep" --initial-cluster "e$n=http://127.0.0.1:$ep" \
    --listen-metrics-urls "http://127.0.0.1:$((ec + 2))" --log-level warn > "$r/etcd.log" 2>&1 &
  echo $! > "$r/etcd.pid"
  for _ in $(seq 60); do curl -sf "http://127.0.0.1:$ec/health" >/dev/null && break; sleep 0.5; done
  "$BASE/bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$ec" --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 --secure-port="$ap" --cert-dir="$r/certs" --tls-cert-file="$p/apiserver.crt" \
    --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" --token-auth-file="$p/tokens.csv" \
    --authorization-mode=RBAC --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --api-audiences=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --enable-priority-and-fairness=false --profiling=false --endpoint-reconciler-type=none \
    ${EXTRA_APISERVER_ARGS:-} > "$r/apiserver.log" 2>&1 &
  echo $! > "$r/apiserver.pid"
  cat > "$r/kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: real$n
  cluster: {server: "https://127.0.0.1:$ap", certificate-authority-data: $(base64 -w0 < "$p/ca.crt")}
users:
- name: admin
  user: {token: $(cat "$p/token")}
contexts:
- name: real$n
  context: {cluster: real$n, user: admin}
current-context: real$n
EOK
  for _ in $(seq 240); do
    curl -sf --cacert "$p/ca.crt" -H "Authorization: Bearer $(cat "$p/token")" "https://127.0.0.1:$ap/readyz" >/dev/null && { echo "ready: $r/kubeconfig"; return 0; }
    sleep 0.5
  done
  echo "kube-apiserver #$n not ready" >&2; tail -30 "$r/apiserver.log" >&2; return 1
}

stop() {
  local r="$BASE/run$1"
  for c in apiserver etcd; do
    local f="$r/$c.pid"; [ -f "$f" ] || continue; local pid; pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || { rm -f "$f"; continue; }
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    rm -f "$f"
  done
}

case "${1:-}" in
  build) build ;;
  start) start "$2" "$3" ;;
  stop) stop "$2" ;;
  pki) pki "$2" ;;
  *) sed -n 2,18p "$0"; exit 2 ;;
esac
