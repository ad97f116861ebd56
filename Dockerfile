# pagoda on Debian 12, built with the project's own dependency script. Two images:
#   docker build -t pagoda .                          # CPU (the default, last stage)
#   docker build --target cuda -t pagoda:cuda .       # CUDA (NVIDIA's CUDA repo for Debian 12)
#   docker run --rm -p 50051:50051 -p 9090:9090 -v /models:/models pagoda --model /models/model.gguf
#   docker run --rm --gpus all ... pagoda:cuda --model /models/model.gguf
# The CUDA target has never been built or run in this project's CI (no GPU, no network
# there): see deploy/README.md.

# ---- CPU build
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_CUDA=OFF \
 && cmake --build build --target pagoda pagoda-bench

# ---- CUDA build: the same dependencies plus nvcc, cudart and cuBLAS from NVIDIA's repository.
FROM debian:12 AS cuda-build
ARG CUDA_VERSION=12.4
ARG CUDA_ARCHITECTURES="80;90"
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh \
 && apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates wget \
 && wget -q https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
 && dpkg -i cuda-keyring_1.1-1_all.deb && rm cuda-keyring_1.1-1_all.deb \
 && v=$(echo "$CUDA_VERSION" | tr . -) && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends cuda-nvcc-$v cuda-cudart-dev-$v libcublas-dev-$v \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_CUDA=ON \
      -DCMAKE_CUDA_COMPILER=/usr/local/cuda-${CUDA_VERSION}/bin/nvcc \
      "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
 && cmake --build build --target pagoda pagoda-bench

# ---- What both images run on.
FROM debian:12 AS runtime-base
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libgrpc++1.51 libgrpc29 libprotobuf32 \
      libopenblas0-pthread libspdlog1.10 libfmt9 libcpp-httplib0.11 libabsl20220623 libre2-9 \
      libutf8proc2 libhwy1 \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 50051 9090

# ---- CUDA image: the CUDA runtime and cuBLAS; the driver comes from the host through the
# NVIDIA container toolkit (docker --gpus, or the Kubernetes device plugin).
FROM runtime-base AS cuda
ARG CUDA_VERSION=12.4
COPY --from=cuda-build /src/build/bin/pagoda /src/build/bin/pagoda-bench /usr/local/bin/
ADD https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb /tmp/
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates \
 && dpkg -i /tmp/cuda-keyring_1.1-1_all.deb && rm /tmp/cuda-keyring_1.1-1_all.deb \
 && v=$(echo "$CUDA_VERSION" | tr . -) && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends cuda-cudart-$v libcublas-$v \
 && rm -rf /var/lib/apt/lists/*
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
ENTRYPOINT ["/usr/local/bin/pagoda", "serve", "--host", "0.0.0.0", "--port", "50051", \
            "--metrics-port", "9090"]

# ---- CPU image (last, so a plain `docker build` makes it).
FROM runtime-base AS cpu
COPY --from=build /src/build/bin/pagoda /src/build/bin/pagoda-bench /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/pagoda", "serve", "--host", "0.0.0.0", "--port", "50051", \
            "--metrics-port", "9090"]
