// Not built with pagoda: writes tests/data/ggml_vec_dot.json, ggml-cpu's own dot products
// (activations quantized by ggml, weights by pagoda's reference quantizer, which writes
// ggml's bytes) for the deterministic inputs tests/quant_matmul_test.cc regenerates.
// Build against a llama.cpp build (commit de3ff815, GGML_NATIVE=OFF, x86 AVX2):
//   g++ -std=c++20 -O2 -I. -I$LLAMA/ggml/include tests/ggml_vec_dot_gen.cc \
//     build/kernels/libpagoda_quant.a -L$LLAMA/build/bin -lggml-cpu -lggml-base \
//     -Wl,-rpath,$LLAMA/build/bin -o /tmp/gen && /tmp/gen > tests/data/ggml_vec_dot.json
#include <cstdio>
#include <cstring>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/quant/quantize.h"
using namespace pagoda::kernels;
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float Sym() { return static_cast<float>(Next() >> 40) / 8388608.f - 1.f; }
};
int main() {
  ggml_cpu_init();
  struct P {
    ggml_type g;
    DType d;
    const char* name;
  };
  P types[] = {{GGML_TYPE_F16, DType::kF16, "f16"},    {GGML_TYPE_BF16, DType::kBF16, "bf16"},
               {GGML_TYPE_Q4_0, DType::kQ4_0, "q4_0"}, {GGML_TYPE_Q4_1, DType::kQ4_1, "q4_1"},
               {GGML_TYPE_Q5_0, DType::kQ5_0, "q5_0"}, {GGML_TYPE_Q5_1, DType::kQ5_1, "q5_1"},
               {GGML_TYPE_Q8_0, DType::kQ8_0, "q8_0"}, {GGML_TYPE_Q2_K, DType::kQ2_K, "q2_k"},
               {GGML_TYPE_Q3_K, DType::kQ3_K, "q3_k"}, {GGML_TYPE_Q4_K, DType::kQ4_K, "q4_k"},
               {GGML_TYPE_Q5_K, DType::kQ5_K, "q5_k"}, {GGML_TYPE_Q6_K, DType::kQ6_K, "q6_k"}};
  printf("{\n");
  for (int t = 0; t < 12; ++t) {
    auto [g, d, name] = types[t];
    const auto* tr = ggml_get_type_traits_cpu(g);
    printf("  \"%s\": [", name);
    for (int c = 0; c < 16; ++c) {
      const int n =
          (d == DType::kF16 || d == DType::kBF16) ? 256 + 8 * c + (c % 3) : 256 * (1 + c % 3);
      Rng rng{static_cast<uint64_t>(1000 * t + c)};
      std::vector<float> w(n), x(n);
      for (int i = 0; i < n; ++i) w[i] = rng.Sym() * (1 + i % 5);
      for (int i = 0; i < n; ++i) x[i] = rng.Sym() * (1 + i % 7) * (c + 1);
      std::vector<uint8_t> wq(DTypeRowBytes(d, n)), a(4 * n + 1024);
      quant::QuantizeRow(d, w.data(), wq.data(), n);
      ggml_get_type_traits_cpu(tr->vec_dot_type)->from_float(x.data(), a.data(), n);
      float s;
      tr->vec_dot(n, &s, 0, wq.data(), 0, a.data(), 0, 1);
      uint32_t bits;
      memcpy(&bits, &s, 4);
      printf("%s%u", c ? ", " : "", bits);
    }
    printf("]%s\n", t < 11 ? "," : "");
  }
  printf("}\n");
}
