# The Ringmaster coordinator (`ringmaster serve`) with kubectl, for
# deploy/k8s/coordinator.yaml. No CUDA: the coordinator never touches a GPU.
# Build from the repository root:
#   docker build -f deploy/docker/coordinator.Dockerfile \
#       -t ringmaster-coordinator:0.1 .
FROM debian:12 AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev \
      protobuf-compiler libabsl-dev libopenmpi-dev openmpi-bin \
      libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev \
      libsqlite3-dev libopenblas-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DRINGMASTER_BUILD_TESTS=OFF -DRINGMASTER_CUDA=OFF \
    && cmake --build /build --target ringmaster

FROM debian:12-slim
ARG DEBIAN_FRONTEND=noninteractive
# kubectl: pin the version you run (here 1.31) and check its checksum.
ARG KUBECTL_VERSION=v1.31.4
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      ca-certificates curl libgrpc++1.51 libprotobuf32 libyaml-cpp0.7 \
      libspdlog1.10 libfmt9 libsqlite3-0 libopenmpi3 \
    && curl -fsSLo /usr/local/bin/kubectl \
       "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/amd64/kubectl" \
    && curl -fsSLo /tmp/kubectl.sha256 \
       "https://dl.k8s.io/release/${KUBECTL_VERSION}/bin/linux/amd64/kubectl.sha256" \
    && echo "$(cat /tmp/kubectl.sha256)  /usr/local/bin/kubectl" | sha256sum -c - \
    && chmod 0755 /usr/local/bin/kubectl && rm /tmp/kubectl.sha256 \
    && apt-get purge -y curl && apt-get autoremove -y \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/ringmaster /usr/local/bin/
RUN useradd --uid 1000 --create-home ringmaster
USER 1000
ENTRYPOINT ["ringmaster"]
