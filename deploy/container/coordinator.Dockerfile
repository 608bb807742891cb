# The coordinator image: autoaccel-server and the CLI (autoaccel) on a small
# Debian 12 runtime. Build from the repository root:
#
#   podman build -f deploy/container/coordinator.Dockerfile -t autoaccel-coordinator .
#   docker build -f deploy/container/coordinator.Dockerfile -t autoaccel-coordinator .
#
# Base images are arguments, so a registry mirror can stand in for Docker Hub
# (--build-arg BUILD_BASE=mirror.example/debian:bookworm ...). The runtime
# stage installs exactly the Debian packages that own the shared libraries
# the two binaries load (found with ldd and dpkg in the build stage).
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config ccache \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev libspdlog-dev \
      libeigen3-dev libssl-dev libmicrohttpd-dev libseccomp-dev libcpp-httplib-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the server and the CLI are built from, so an edit elsewhere (docs,
# tests, the worker's examples) keeps this layer's cache.
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
# ccache's directory is a build cache mount (BuildKit, buildah): a rebuild after
# an edit compiles only what changed.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DAUTOACCEL_BUILD_ENGINE=OFF -DAUTOACCEL_BUILD_TESTS=OFF \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
 && cmake --build build -j "${BUILD_JOBS}" --target autoaccel-server autoaccel \
 && strip build/bin/autoaccel-server build/bin/autoaccel \
 && for lib in $(ldd build/bin/autoaccel-server build/bin/autoaccel | awk '$3 ~ /^\// {print $3}' | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")" || exit 1; \
    done > build/library-owners \
 && cut -d: -f1 build/library-owners | sort -u > build/runtime-packages \
 && cat build/runtime-packages

FROM ${RUNTIME_BASE}
COPY --from=build /src/build/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates $(cat /tmp/runtime-packages) \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && useradd --uid 10001 --user-group --home-dir /var/lib/autoaccel --create-home \
      --shell /usr/sbin/nologin autoaccel
COPY --from=build /src/build/bin/autoaccel-server /src/build/bin/autoaccel /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/autoaccel
# The SQLite database (jobs, trials, the strategy database): keep it on a volume.
VOLUME ["/var/lib/autoaccel"]
# 50051: gRPC (CLI and workers); 8080: HTTPS (dashboard, /metrics, /healthz, /readyz).
EXPOSE 50051 8080
ENTRYPOINT ["autoaccel-server"]
# TLS and tokens as deploy/tls/make-certs and make-tokens write them, mounted
# at /etc/autoaccel/tls and /etc/autoaccel/tokens (Kubernetes: Secrets).
CMD ["--listen", "0.0.0.0:50051", "--http-listen", "0.0.0.0:8080", \
     "--db", "/var/lib/autoaccel/autoaccel.db", \
     "--tls-cert", "/etc/autoaccel/tls/coordinator.pem", \
     "--tls-key", "/etc/autoaccel/tls/coordinator.key", \
     "--tls-ca", "/etc/autoaccel/tls/ca.pem", \
     "--tokens", "/etc/autoaccel/tokens/tokens", \
     "--join-token-file", "/etc/autoaccel/tokens/join-token", \
     "--http-tls-cert", "/etc/autoaccel/tls/coordinator.pem", \
     "--http-tls-key", "/etc/autoaccel/tls/coordinator.key"]
