#!/usr/bin/env bash
# Builds the coordinator image (deploy/container/coordinator.Dockerfile) with
# podman and runs it as deploy/README.md says: TLS files and tokens from
# deploy/tls mounted at /etc/autoaccel, the image's own default flags (with
# ports 0 instead of 50051 and 8080, so that it runs beside anything), the CLI
# of the image against it, and a SIGTERM that stops it in order.
#
#   coordinator_image.sh
#
# Opt-in (cmake -DAUTOACCEL_CONTAINER_TESTS=ON; ~11 minutes the first time on
# 2 cores, since the image compiles the server). Without a debian:bookworm
# image (Docker Hub unreachable) it makes one from Debian's mirror with
# debootstrap. Exit 77 (skipped) without podman, or debootstrap when needed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v podman >/dev/null || { echo "SKIP: podman not found (apt-get install podman)"; exit 77; }
base=${AUTOACCEL_DEBIAN_IMAGE:-localhost/debian:bookworm}
tag=localhost/autoaccel-coordinator:test
# What this sandbox's podman needs: runc (crun refuses hybrid cgroups) and
# ulimits within the hard limits it was given.
podman_run=(podman)
command -v runc >/dev/null && podman_run+=(--runtime runc)
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)

tmp=$(mktemp -d /tmp/autoaccel-image.XXXXXX)
name=autoaccel-coordinator-test-$$
cleanup() {
  "${podman_run[@]}" rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

if ! podman image exists "$base"; then
  command -v debootstrap >/dev/null || { echo "SKIP: no $base image and no debootstrap to make one"; exit 77; }
  echo "making $base from Debian's mirror (debootstrap)"
  debootstrap --variant=minbase bookworm "$tmp/rootfs" http://deb.debian.org/debian >"$tmp/debootstrap.log"
  rm -f "$tmp"/rootfs/var/cache/apt/archives/*.deb
  tar -C "$tmp/rootfs" -c . | podman import -q - "$base" >/dev/null
  rm -rf "$tmp/rootfs"
fi

start=$SECONDS
"${podman_run[@]}" build -q "${limits[@]}" -f "$repo/deploy/container/coordinator.Dockerfile" \
  --build-arg BUILD_BASE="$base" --build-arg RUNTIME_BASE="$base" -t "$tag" "$repo" >/dev/null
echo "built $tag in $((SECONDS - start)) s: $(podman image inspect "$tag" --format '{{.Size}}') bytes"

"$repo/deploy/tls/make-certs" "$tmp/tls" coordinator=localhost,127.0.0.1 >/dev/null
"$repo/deploy/tls/make-tokens" "$tmp/tokens" alice >/dev/null
mkdir -p "$tmp/data"
chown -R 10001:10001 "$tmp/tls" "$tmp/tokens" "$tmp/data"  # the image's user

# The image's default flags, on ports the kernel picks.
mapfile -t flags < <(podman image inspect "$tag" --format '{{range .Config.Cmd}}{{println .}}{{end}}' \
  | sed -e '/^$/d' -e 's/^0\.0\.0\.0:50051$/0.0.0.0:0/' -e 's/^0\.0\.0\.0:8080$/127.0.0.1:0/')
"${podman_run[@]}" run "${limits[@]}" -d --name "$name" --network host \
  -v "$tmp/data:/var/lib/autoaccel" -v "$tmp/tls:/etc/autoaccel/tls:ro" \
  -v "$tmp/tokens:/etc/autoaccel/tokens:ro" "$tag" "${flags[@]}" >/dev/null
port=""
for _ in $(seq 1 50); do
  port=$(podman logs "$name" 2>&1 | sed -n 's/^autoaccel-server listening on 0\.0\.0\.0:\([0-9]*\) .*/\1/p')
  [ -n "$port" ] && break
  [ "$(podman inspect "$name" --format '{{.State.Running}}')" = true ] || break
  sleep 0.2
done
if [ -z "$port" ]; then
  echo "FAIL: the coordinator did not start:"
  podman logs "$name"
  exit 1
fi
podman logs "$name" 2>&1 | head -n 2
cli=(podman exec "$name" autoaccel --server "localhost:$port" --tls-ca /etc/autoaccel/tls/ca.pem)
out=$("${cli[@]}" --token-file /etc/autoaccel/tokens/alice.token workers)
echo "autoaccel workers: $out"
grep -qix "no workers registered" <<<"$out" || { echo "FAIL: unexpected answer"; exit 1; }
if "${cli[@]}" workers >/dev/null 2>&1; then
  echo "FAIL: the coordinator answered a call without a token"
  exit 1
fi
http=$(podman logs "$name" 2>&1 | sed -n 's/.*http listening on [^ ]*:\([0-9]*\).*/\1/p' | head -n 1)
if [ -n "$http" ]; then
  # What the Kubernetes probes and Prometheus read (deploy/kubernetes/coordinator.yaml).
  python3 - "$http" <<'PY' || { echo "FAIL: the HTTP port"; exit 1; }
import sys, time, urllib.error, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
assert get("/healthz")[0] == 200, "/healthz"
for _ in range(50):
    if get("/readyz")[0] == 200:
        break
    time.sleep(0.1)
else:
    raise SystemExit("/readyz never answered 200")
status, text = get("/metrics")
assert status == 200 and "# TYPE" in text, "/metrics is no Prometheus exposition"
print(f"/healthz, /readyz, /metrics on {sys.argv[1]}: 200")
PY
fi
podman stop -t 30 "$name" >/dev/null
logs=$(podman logs "$name" 2>&1)
grep -q "signal 15: shutting down" <<<"$logs" || { echo "FAIL: no orderly stop"; echo "$logs"; exit 1; }
[ -s "$tmp/data/autoaccel.db" ] || { echo "FAIL: no database on the volume"; exit 1; }
echo "PASS: image built, served TLS with tokens, stopped in order, database on the volume"
