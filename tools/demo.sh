#!/usr/bin/env bash
# The main job: a real VM on a local Kubernetes cluster running kubevirt-py.
#
# 1. `kv-cluster up`: etcd, kube-apiserver, controller-manager, scheduler, the image
#    registry, one node (containerd, kubelet, CNI, kube-proxy, DNS), virt-api,
#    virt-controller, virt-handler, and the KubeVirt CR (useEmulation when KVM cannot run
#    guests here).
# 2. `kv-images build`: the launcher and guest images, pushed to the cluster's registry.
# 3. `kubectl apply -f examples/vm-kernel-boot.yaml`, then wait (printing the VMI's
#    phase) until it is Running.
# 4. `virtctl console` until the guest's marker shows.
set -euo pipefail
cd "$(dirname "$0")/.."

MARKER=KUBEVIRT-PY-GUEST-READY
# A fresh namespace per run: a VM left over from an earlier run (or stuck terminating)
# never decides this run's outcome. Older demo namespaces are deleted in the background.
NAMESPACE=${DEMO_NAMESPACE:-kv-demo-$(date +%s)}
VM=vm-kernel-boot

say() { printf '\n==> %s\n' "$*"; }

say "offline check of the examples (virtctl validate)"
uv run --frozen virtctl validate -f examples/

say "bringing up the local cluster with kubevirt-py (kv-cluster up)"
uv run --frozen kv-cluster up
KUBECONFIG=$(uv run --frozen kv-cluster kubeconfig)
export KUBECONFIG
KUBECTL=.venv/bin/kubectl

say "building the launcher and guest images into the cluster's registry (kv-images, cached by content)"
# Pushed under their content tags and :devel and :latest (the examples' tag); the node
# pulls them from the cluster's registry when the VM's pods start.
uv run --frozen kv-images build virt-launcher guest-kernel-boot guest-containerdisk

for old in $($KUBECTL get namespaces -l kubevirt-py.io/demo=true -o name 2>/dev/null); do
  [ "$old" = "namespace/$NAMESPACE" ] || $KUBECTL delete "$old" --wait=false >/dev/null 2>&1 || true
done
$KUBECTL create namespace "$NAMESPACE" --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null
$KUBECTL label namespace "$NAMESPACE" kubevirt-py.io/demo=true --overwrite >/dev/null

say "applying examples/$VM.yaml in namespace $NAMESPACE"
$KUBECTL apply -n "$NAMESPACE" -f "examples/$VM.yaml"

say "waiting for VMI $VM to be Running"
start=$(date +%s)
last=""
while true; do
  phase=$($KUBECTL get vmi -n "$NAMESPACE" "$VM" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  pod=$($KUBECTL get pods -n "$NAMESPACE" -l "vm.kubevirt.io/name=$VM" \
        -o jsonpath='{.items[0].status.phase}' 2>/dev/null || true)
  now=$(( $(date +%s) - start ))
  line="VMI phase: ${phase:-<not created yet>}, launcher pod: ${pod:-<none yet>}"
  if [ "$line" != "$last" ]; then printf '  [%3ss] %s\n' "$now" "$line"; last=$line; fi
  [ "$phase" = Running ] && break
  if [ "$now" -gt 600 ]; then
    echo "VMI $VM did not reach Running within 600 s; recent events:" >&2
    $KUBECTL get events -n "$NAMESPACE" --sort-by=.lastTimestamp | tail -15 >&2
    exit 1
  fi
  sleep 2
done

say "the guest's serial console (virtctl console $VM), until its marker"
uv run --frozen virtctl console "$VM" -n "$NAMESPACE" --until "$MARKER" --timeout-seconds 120 </dev/null
printf '\n\n==> VM %s is Running and its guest printed %s on the console.\n' "$VM" "$MARKER"
echo "    Try: uv run virtctl console $VM -n $NAMESPACE   |   uv run virtctl stop $VM -n $NAMESPACE"
