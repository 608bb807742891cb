# The worker image: autoaccel-worker, the LibTorch trial runner
# (autoaccel-trial) and the CLI, with PyTorch's wheel (LibTorch and its CUDA
# 13.0 libraries), bubblewrap for the trial sandbox, and Python with the
# launcher examples. Build from the repository root:
#
#   podman build -f deploy/container/worker.Dockerfile -t autoaccel-worker .
#
# CUDA: the torch 2.11.0 wheel from PyPI is built for CUDA 13.0 and brings its
# own CUDA libraries (cuBLAS, cuDNN, NCCL, ... as nvidia-* wheels), so the
# runtime stage needs no CUDA base image: the node's driver (>= 580, CUDA 13)
# and nvidia-smi come in through the NVIDIA Container Toolkit, which the
# NVIDIA_* variables below ask for. The build stage takes nvcc and the CUDA
# runtime headers from NVIDIA's Debian 12 repository (CUDA_REPO) to build the
# NCCL process groups of multi-rank CUDA trials; with CUDA_REPO="" the image
# is built without them (single-rank CUDA trials, CPU and launcher trials only).
# Both stages are Debian 12 because the binaries link Debian's gRPC, protobuf
# and abseil; an nvidia/cuda (Ubuntu) runtime base would need the build stage on
# the same Ubuntu.
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config ccache ca-certificates curl \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev \
      libeigen3-dev libssl-dev libmicrohttpd-dev libseccomp-dev libcpp-httplib-dev libgloo-dev python3-venv \
 && rm -rf /var/lib/apt/lists/*
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
ARG CUDA_VERSION=13-0
RUN if [ -n "${CUDA_REPO}" ]; then \
      curl -fsSL -o /tmp/cuda-keyring.deb "${CUDA_REPO}/cuda-keyring_1.1-1_all.deb" \
      && dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb \
      && apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           "cuda-nvcc-${CUDA_VERSION}" "cuda-cudart-dev-${CUDA_VERSION}" \
      && rm -rf /var/lib/apt/lists/*; \
    fi
# The venv keeps this path in the runtime stage: the binaries' RPATH names
# its torch/lib.
ARG TORCH_VERSION=2.11.0
# The launcher examples' own needs (examples/*/; scripts/setup pins the same).
ARG EXAMPLE_PACKAGES="transformers==5.23.0 accelerate==1.15.0 numpy"
RUN python3 -m venv /opt/autoaccel/venv \
 && /opt/autoaccel/venv/bin/pip install --no-cache-dir -q "torch==${TORCH_VERSION}" ${EXAMPLE_PACKAGES}
COPY python /src/python
RUN /opt/autoaccel/venv/bin/pip install --no-cache-dir -q /src/python
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY proto proto
COPY report report
COPY common common
COPY search search
COPY export export
COPY trial_contract trial_contract
COPY bench bench
COPY engine engine
COPY server server
COPY worker worker
COPY client client
ARG BUILD_JOBS=2
RUN --mount=type=cache,target=/root/.cache/ccache \
    cuda_root=$(ls -d /usr/local/cuda-* 2>/dev/null | head -n 1); \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOACCEL_BUILD_TESTS=OFF \
      -DAUTOACCEL_PYTHON=/opt/autoaccel/venv/bin/python \
      ${cuda_root:+-DCUDAToolkit_ROOT=$cuda_root} \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
 && cmake --build build -j "${BUILD_JOBS}" --target autoaccel-worker autoaccel-trial autoaccel \
 && strip build/bin/autoaccel-worker build/bin/autoaccel-trial build/bin/autoaccel \
 && for lib in $(ldd build/bin/autoaccel-worker build/bin/autoaccel-trial build/bin/autoaccel \
                 | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}' | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" || exit 1; \
    done > build/library-owners \
 && cut -d: -f1 build/library-owners | sort -u > build/runtime-packages \
 && cat build/runtime-packages

FROM ${RUNTIME_BASE}
COPY --from=build /src/build/runtime-packages /tmp/runtime-packages
# python3: the venv's interpreter; bubblewrap and util-linux (setpriv): the
# trial sandbox (docs/SECURITY.md).
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates python3 bubblewrap util-linux $(cat /tmp/runtime-packages) \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
COPY --from=build /opt/autoaccel/venv /opt/autoaccel/venv
# The trial runner sits next to the worker, where the worker looks for it.
COPY --from=build /src/build/bin/autoaccel-worker /src/build/bin/autoaccel-trial \
     /src/build/bin/autoaccel /opt/autoaccel/bin/
# The training scripts of deploy/kubernetes/launchers.json.
COPY examples /opt/autoaccel/examples
ENV PATH=/opt/autoaccel/bin:/opt/autoaccel/venv/bin:${PATH} \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
# Trial specs, results, logs and the model file cache.
VOLUME ["/var/lib/autoaccel-worker"]
# 50052: the trial service (the coordinator dials it); 29500-29999: the
# rendezvous ports of multi-rank trials (--rendezvous-ports).
EXPOSE 50052 29500-29999
# Root, so the sandbox can run each rank as `nobody` (docs/SECURITY.md); the
# container needs CAP_SYS_ADMIN and no seccomp filter on mount/unshare for it
# (deploy/kubernetes/worker.yaml, deploy/README.md).
ENTRYPOINT ["autoaccel-worker"]
# Flags name the coordinator and the devices: deploy/README.md, "Containers".
CMD ["--help"]
