#!/usr/bin/env bash
# Installs every Debian package pagoda needs to build, test and serve.
# Idempotent: packages already present are skipped; apt-get runs only when
# something is missing. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libhwy-dev libboost-dev libcpp-httplib-dev nlohmann-json3-dev libcli11-dev libutf8proc-dev  # libboost-dev: Boost.Beast/Asio for the HTTP door
  clang libclang-rt-14-dev  # make clang-checks: -Wthread-safety, libFuzzer, ASan/UBSan runtimes
  nginx  # tests/nginx_lb_test.cc runs deploy/nginx-grpc.conf in front of two daemons
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
