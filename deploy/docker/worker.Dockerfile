# ringmaster-worker on an NVIDIA CUDA base: NCCL and cuBLAS from the CUDA
# image, OpenMPI from Ubuntu, and OpenSSH for the MPIJob style (the
# operator's launcher pod starts the ranks over ssh; each worker pod runs
# `sshd -De`). The Indexed-Job style uses neither. Build from the repository
# root:
#   docker build -f deploy/docker/worker.Dockerfile -t ringmaster-worker:0.1 .
#
# Ubuntu 24.04 ships the same gRPC 1.51 / Protobuf 3.21 / Abseil 20220623
# set as Debian 12, which the build is pinned to.
ARG CUDA_VERSION=13.0.0

FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      build-essential cmake ninja-build pkg-config git \
      libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev \
      protobuf-compiler libabsl-dev libopenmpi-dev openmpi-bin \
      libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev \
      libsqlite3-dev libopenblas-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DRINGMASTER_BUILD_TESTS=OFF \
    && cmake --build /build --target ringmaster-worker ringmaster

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
ARG DEBIAN_FRONTEND=noninteractive
# Runtime libraries of the build above (the -dev packages' shared objects).
RUN apt-get update -q && apt-get install -y -q --no-install-recommends \
      libgrpc++1.51t64 libprotobuf32t64 libyaml-cpp0.8 libspdlog1.12 \
      libfmt9 libsqlite3-0 libopenblas0 openmpi-bin libopenmpi3t64 \
      openssh-server openssh-client \
    && rm -rf /var/lib/apt/lists/*
# sshd for the MPIJob style: its privilege-separation folder, the keys the
# operator mounts (a Secret volume, whose file modes StrictModes rejects),
# and ssh that trusts the pods it is pointed at without a prompt.
RUN mkdir -p /run/sshd \
    && sed -i 's/^#\?StrictModes .*/StrictModes no/' /etc/ssh/sshd_config \
    && printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' \
         >> /etc/ssh/ssh_config
COPY --from=build /build/bin/ringmaster-worker /build/bin/ringmaster \
     /usr/local/bin/
# OpenMPI refuses root without this; the Indexed-Job style ignores it.
ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENTRYPOINT ["ringmaster-worker"]
