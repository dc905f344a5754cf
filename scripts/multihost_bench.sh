#!/usr/bin/env bash
# all_reduce busbw of the ring backend against gloo between two "hosts" on this machine: two
# network namespaces joined by a veth pair (10.99.250.1 and .2), NPROC ranks in each, started
# by torchrun --nnodes=2 with the c10d rendezvous. Needs root. Removes what it creates.
#   TRANSPORT (default tcp): TORCH_RING_TRANSPORT for the ring backend (tcp | auto)
#   NPROC (default 1): ranks per namespace
#   extra arguments go to torch_ring_backend.bench (default: -b 1M -e 64M)
set -euo pipefail
cd "$(dirname "$0")/.."
TRANSPORT=${TRANSPORT:-tcp}
NPROC=${NPROC:-1}
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(-b 1M -e 64M --collectives all_reduce)
tag=$$
NS=(ringbenchA$tag ringbenchB$tag)
DEV=(vbenA$tag vbenB$tag)
IP=(10.99.250.1 10.99.250.2)
cleanup() { for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done; }
trap cleanup EXIT
for ns in "${NS[@]}"; do ip netns add "$ns"; done
ip link add "${DEV[0]}" type veth peer name "${DEV[1]}"
for i in 0 1; do
  ip link set "${DEV[$i]}" netns "${NS[$i]}"
  ip netns exec "${NS[$i]}" ip addr add "${IP[$i]}/24" dev "${DEV[$i]}"
  ip netns exec "${NS[$i]}" ip link set "${DEV[$i]}" up
  ip netns exec "${NS[$i]}" ip link set lo up
done
PORT=29555
pids=()
for i in 0 1; do
  # unshare --ipc: the two namespaces then count as two hosts for the ring's transport choice.
  TORCH_RING_TRANSPORT=$TRANSPORT GLOO_SOCKET_IFNAME=${DEV[$i]} OMP_NUM_THREADS=1 \
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
    ip netns exec "${NS[$i]}" unshare --ipc python3 -m torch.distributed.run \
      --nnodes=2 --nproc_per_node="$NPROC" --rdzv-backend=c10d \
      --rdzv-endpoint="${IP[0]}:$PORT" --rdzv-id=ringbench$tag \
      --rdzv-conf=is_host=$((1 - i)) --local-addr="${IP[$i]}" --max-restarts=0 \
      -m torch_ring_backend.bench "${ARGS[@]}" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
