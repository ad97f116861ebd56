// Cross-check: dequantize a tensor with ggml's own to_float and compare bytes with a .f32 file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "gguf.h"
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: gguf tensor ref.f32\n"); return 2; }
  struct gguf_init_params p = { .no_alloc = true, .ctx = NULL };
  struct gguf_context *g = gguf_init_from_file(argv[1], p);
  if (!g) return 3;
  int64_t id = gguf_find_tensor(g, argv[2]);
  if (id < 0) return 4;
  enum ggml_type t = gguf_get_tensor_type(g, id);
  size_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id);
  size_t nb = gguf_get_tensor_size(g, id);
  FILE *f = fopen(argv[1], "rb"); fseek(f, (long)off, SEEK_SET);
  void *raw = malloc(nb); if (fread(raw, 1, nb, f) != nb) return 5; fclose(f);
  FILE *r = fopen(argv[3], "rb"); fseek(r, 0, SEEK_END); long rs = ftell(r); fseek(r, 0, SEEK_SET);
  float *ref = malloc(rs); if (fread(ref, 1, rs, r) != (size_t)rs) return 6; fclose(r);
  int64_t n = rs / 4;
  float *out = malloc(rs);
  ggml_get_type_traits(t)->to_float(raw, out, n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) if (memcmp(&out[i], &ref[i], 4) != 0) { if (bad < 3) fprintf(stderr, "  diff at %lld: ggml %.9g ref %.9g\n", (long long)i, out[i], ref[i]); bad++; }
  printf("%s %s %s: n=%lld mismatches=%lld\n", argv[1], argv[2], ggml_type_name(t), (long long)n, (long long)bad);
  return bad != 0;
}
