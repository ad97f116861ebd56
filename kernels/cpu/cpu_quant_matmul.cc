#include "kernels/cpu/cpu_quant_matmul.h"

#include <algorithm>

#include "kernels/cpu_isa.h"
#include "kernels/quant/activation_quant.h"
#include "kernels/quant/interleaved.h"
#include "kernels/quant/vec_dot_rows.h"

namespace pagoda::kernels::cpu {
namespace {

// Products below this many multiply-adds run on the calling thread.
constexpr int64_t kMinParallelMacs = 1 << 18;
// Output columns per work item (one interleaved group of Q4_Kx16 rows).
constexpr int64_t kColumnGrain = 16;
static_assert(kColumnGrain % quant::kInterleavedRows == 0);

}  // namespace

void QuantMatMul(const Tensor& x, const Tensor& w, const Tensor& out, std::vector<uint8_t>* scratch,
                 ThreadPool* pool) {
  const int64_t n = x.rows, m = w.rows, k = x.cols;
  const DType act_type = quant::VecDotType(w.dtype);
  const size_t act_row = DTypeRowBytes(act_type, k);
  const size_t w_row = DTypeRowBytes(w.dtype, w.stride);
  // Q8_0 activations also keep their block scales as floats, after the rows (for the AVX2
  // kernels); Q8_0 and Q8_K ones their block scales per group of kVecDotRows rows side by
  // side (ActRows::block_d, for the AVX-512 kernels).
  const bool wide = act_type == DType::kQ8_0;
  // Interleaved weights (interleaved.h): Q6_K's kernel reads the Q8_K rows as they are,
  // Q4_K's those and their sub-block sums (SumPairsQ8_K), Q8_0's the widened scales and
  // each row's quants biased (BiasQuantsQ8_0); both side data per group where the packed
  // quants go.
  const bool x16 =
      w.dtype == DType::kQ4_Kx16 || w.dtype == DType::kQ8_0x16 || w.dtype == DType::kQ6_Kx16;
  const bool biased = w.dtype == DType::kQ8_0x16;
  const bool sum_pairs = w.dtype == DType::kQ4_Kx16;
  const bool side_by_side = !x16 && (act_type == DType::kQ8_K || act_type == DType::kQ8_0);
  // The packed quants (ActRows::qs) only the AVX-512 kernels read.
  const bool pack = side_by_side && CpuIsaActive(CpuIsa::kAvx512);
  const int64_t groups = (n + quant::kVecDotRows - 1) / quant::kVecDotRows;
  const int64_t scale_row = wide ? k / 32 : 0;
  const int64_t group_d = side_by_side ? k / DTypeBlockElems(act_type) * quant::kVecDotRows : 0;
  const size_t acts_bytes = (act_row * static_cast<size_t>(n) + 63) & ~size_t{63};
  // The quants packed per group (ActRows::qs), 64-byte aligned, after the floats.
  const size_t floats_bytes =
      (sizeof(float) * static_cast<size_t>(scale_row * n + group_d * groups) + 63) & ~size_t{63};
  const size_t group_qs = pack        ? quant::PackedQuantsBytes(act_type, k)
                          : biased    ? static_cast<size_t>(k) * quant::kVecDotRows
                          : sum_pairs ? static_cast<size_t>(k / 16) * quant::kVecDotRows
                                      : 0;
  const size_t bytes = acts_bytes + floats_bytes + group_qs * groups + 64;
  if (scratch->size() < bytes) scratch->resize(bytes);
  // The vector's storage is only 16-byte aligned: start at its first 64-byte boundary.
  uint8_t* acts = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch->data()) + 63) &
                                             ~uintptr_t{63});
  auto* packed = reinterpret_cast<int8_t*>(acts + acts_bytes + floats_bytes);
  float* scales = wide ? reinterpret_cast<float*>(acts + acts_bytes) : nullptr;
  float* block_d =
      side_by_side ? reinterpret_cast<float*>(acts + acts_bytes) + scale_row * n : nullptr;
  const bool parallel = n * m * k >= kMinParallelMacs && pool->num_threads() > 1;
  auto quantize_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      quant::QuantizeActivations(act_type, x.row<const float>(r), acts + r * act_row, k);
      if (wide) quant::WidenScales(acts + r * act_row, k, scales + r * scale_row);
      if (biased) {
        quant::BiasQuantsQ8_0(acts + r * act_row, k,
                              reinterpret_cast<uint8_t*>(packed) +
                                  r / quant::kVecDotRows * group_qs + r % quant::kVecDotRows * k);
      }
      if (sum_pairs) {
        quant::SumPairsQ8_K(acts + r * act_row, k,
                            reinterpret_cast<int16_t*>(packed + r / quant::kVecDotRows * group_qs +
                                                       r % quant::kVecDotRows * (k / 16)));
      }
    }
  };
  // After quantize_rows: each group's block scales, from the rows it holds.
  auto transpose_groups = [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end && side_by_side; ++g) {
      const int64_t r = g * quant::kVecDotRows;
      const int rows = static_cast<int>(std::min<int64_t>(quant::kVecDotRows, n - r));
      quant::TransposeBlockScales(act_type, acts + r * act_row, act_row, rows, k,
                                  block_d + g * group_d);
      if (pack) {
        quant::PackQuants(act_type, acts + r * act_row, act_row, rows, k, packed + g * group_qs);
      }
    }
  };
  // Each group of kVecDotRows activation rows (in L1) meets all of the range's weight rows
  // in one VecDotRows call, which sets its kernel up once (measured faster than calls of a
  // few L1-resident weight rows looping over the groups: docs/ARCHITECTURE.md).
  auto columns = [&](int64_t m0, int64_t m1) {
    for (int64_t r = 0; r < n; r += quant::kVecDotRows) {
      const int rows = static_cast<int>(std::min<int64_t>(quant::kVecDotRows, n - r));
      const quant::ActRows act{
          .data = acts + r * act_row,
          .stride = act_row,
          .rows = rows,
          .scales = wide ? scales + r * scale_row : nullptr,
          .scale_stride = static_cast<size_t>(scale_row),
          .block_d = side_by_side ? block_d + r / quant::kVecDotRows * group_d : nullptr,
          .qs = pack || biased || sum_pairs ? packed + r / quant::kVecDotRows * group_qs : nullptr};
      if (x16) {
        const int64_t w_groups = (m1 - m0) / quant::kInterleavedRows;
        float* o = out.row<float>(r) + m0;
        if (biased) {
          quant::VecDotQ8_0x16Rows(k, w.row_bytes(m0), w_groups, act, o, out.stride);
        } else if (w.dtype == DType::kQ6_Kx16) {
          quant::VecDotQ6_Kx16Rows(k, w.row_bytes(m0), w_groups, act, o, out.stride);
        } else {
          quant::VecDotQ4_Kx16Rows(k, w.row_bytes(m0), w_groups, act, o, out.stride);
        }
        continue;
      }
      const quant::WeightRows weights{.data = w.row_bytes(m0), .stride = w_row, .rows = m1 - m0};
      quant::VecDotRows(w.dtype, k, weights, act, out.row<float>(r) + m0, out.stride);
    }
  };
  if (!parallel) {
    quantize_rows(0, n);
    transpose_groups(0, groups);
    columns(0, m);
    return;
  }
  // Each group's rows quantized, then its side data laid out, by one thread.
  pool->ParallelFor(groups, 1, [&](int64_t begin, int64_t end) {
    quantize_rows(begin * quant::kVecDotRows, std::min(n, end * quant::kVecDotRows));
    transpose_groups(begin, end);
  });
  const int64_t chunks = (m + kColumnGrain - 1) / kColumnGrain;
  pool->ParallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    columns(begin * kColumnGrain, std::min(m, end * kColumnGrain));
  });
}

}  // namespace pagoda::kernels::cpu
