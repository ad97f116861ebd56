# pagoda on Debian 12: builds with the project's own dependency script and runs the daemon.
#   docker build -t pagoda .
#   docker run --rm -p 50051:50051 -p 9090:9090 -v /models:/models pagoda --model /models/model.gguf
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_CUDA=OFF \
 && cmake --build build --target pagoda pagoda-bench

FROM debian:12
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libgrpc++1.51 libgrpc29 libprotobuf32 \
      libopenblas0-pthread libspdlog1.10 libfmt9 libcpp-httplib0.11 libabsl20220623 libre2-9 \
      libutf8proc2 libhwy1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/pagoda /src/build/bin/pagoda-bench /usr/local/bin/
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/pagoda", "serve", "--host", "0.0.0.0", "--port", "50051", \
            "--metrics-port", "9090"]
