// Tensor-core building blocks of the paged-attention kernels (device code, sm_80+):
// async global->shared copies, ldmatrix, mma.sync m16n8k16 with fp32 accumulators, and the
// per-warp online-softmax step over one KV tile.
//
// Fragment layout of mma.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major): reg0 = A[g][2t, 2t+1]    reg1 = A[g+8][2t, 2t+1]
//                           reg2 = A[g][2t+8, 2t+9]  reg3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8):             reg0 = B[2t, 2t+1][g]    reg1 = B[2t+8, 2t+9][g]
//   C (16 x 8, fp32):       c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
// A warp owns 16 query rows (its fragment rows g and g + 8). KV tiles sit in shared memory
// as [tokens][head_dim] with the 16-byte chunk c of row r stored at chunk c ^ (r & 7), so
// the eight rows one ldmatrix phase reads fall in distinct banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace pagoda::kernels::cuda {

constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes global -> shared without staging in registers; src_bytes == 0 writes zeros.
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed copy groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// As LdMatrixX4, each matrix transposed.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 2^x by the special-function unit (relative error ~2^-22; 2^-inf = 0).
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// d += a * b for one m16n8k16 tile, and packing of two fp32 values into an A/B register.
template <typename T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void Run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // lo goes to the lower 16 bits (the lower column index).
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

template <>
struct Mma<__half> {
  static __device__ __forceinline__ void Run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled [rows][kHeadDim] tile.
template <int kHeadDim>
__device__ __forceinline__ int Swizzle(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// The A fragments of a warp's 16 query rows: rows g and g + 8 start at row_lo / row_hi
// (nullptr: a padding row, zeros). Rows must be 4-byte aligned.
template <typename T, int kHeadDim>
__device__ __forceinline__ void LoadQFragments(uint32_t (&qa)[kHeadDim / 16][4], const T* row_lo,
                                               const T* row_hi, int lane) {
  const int t = lane & 3;
  auto load = [](const T* row, int col) -> uint32_t {
    return row == nullptr ? 0u : *reinterpret_cast<const uint32_t*>(row + col);
  };
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    qa[kk][0] = load(row_lo, 16 * kk + 2 * t);
    qa[kk][1] = load(row_hi, 16 * kk + 2 * t);
    qa[kk][2] = load(row_lo, 16 * kk + 8 + 2 * t);
    qa[kk][3] = load(row_hi, 16 * kk + 8 + 2 * t);
  }
}

// Where one KV head's rows are in the cache, and how positions map to slots.
struct KvSource {
  const void* k_plane;  // [num_slots, num_kv_heads, head_dim]
  const void* v_plane;
  const int32_t* table;  // the sequence's block table
  int64_t slot_stride;   // num_kv_heads * head_dim
  int64_t head_offset;   // kv_head * head_dim
  int32_t log2_block_size;

  // Element offset in a plane of this KV head's row of position `pos`.
  __device__ __forceinline__ int64_t RowOffset(int pos) const {
    const int64_t slot = (static_cast<int64_t>(table[pos >> log2_block_size]) << log2_block_size) +
                         (pos & ((1 << log2_block_size) - 1));
    return slot * slot_stride + head_offset;
  }
};

// Starts the copy of K and V for positions [base, base + kTileN) into the swizzled tiles
// sk / sv, spread over kThreads threads (this one is `tid`). Positions >= end become zeros,
// so masked scores meet finite values in P V. The caller commits the group.
template <typename T, int kHeadDim, int kTileN, int kThreads>
__device__ __forceinline__ void LoadKvTile(T* sk, T* sv, const KvSource& src, int base, int end,
                                           int tid) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kChunks = kTileN * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile copy must divide evenly over the threads");
  const T* k_plane = static_cast<const T*>(src.k_plane);
  const T* v_plane = static_cast<const T*>(src.v_plane);
#pragma unroll
  for (int it = 0; it < kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads;
    const int row = i / kChunksPerRow;
    const int chunk = i % kChunksPerRow;
    const int pos = base + row;
    const bool valid = pos < end;
    const int64_t offset = valid ? src.RowOffset(pos) + chunk * 8 : 0;
    const int dst = Swizzle<kHeadDim>(row, chunk);
    CpAsync16(SmemAddr(sk + dst), k_plane + offset, valid ? 16 : 0);
    CpAsync16(SmemAddr(sv + dst), v_plane + offset, valid ? 16 : 0);
  }
}

// Online-softmax state of a warp's 16 rows; this lane holds rows g (index 0) and g + 8 (1).
template <int kHeadDim>
struct WarpState {
  float m[2];                // running max of the scores, log2 units
  float l[2];                // running sum of this lane's probabilities (quad-summed at the end)
  float o[kHeadDim / 8][4];  // O accumulators, C layout: dim 8 j + 2 t + (e & 1), row e / 2

  __device__ __forceinline__ void Init() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m[r] = kNegInf;
      l[r] = 0.f;
    }
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
    }
  }
  // Sums l over the four lanes that share a row; call once after the last tile.
  __device__ __forceinline__ void FinishSums() {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
  }
};

// One KV tile of kTileN tokens for a warp's 16 query rows: S = Q K^T, online softmax, and
// O += P V. sk / sv hold the tile (swizzled [kTileN][kHeadDim]); its first token is at
// position `base`. Fragment row r of this lane (g, g + 8) sees positions <= limit[r]; a row
// with limit < base gets probability 0 everywhere (-1 marks a padding row).
template <typename T, int kHeadDim, int kTileN>
__device__ __forceinline__ void AttendTile(WarpState<kHeadDim>& st,
                                           const uint32_t (&qa)[kHeadDim / 16][4], const T* sk,
                                           const T* sv, int base, const int (&limit)[2],
                                           float scale_log2, int lane) {
  constexpr int kN = kTileN / 8;  // 8-token column tiles of S
  const int r8 = lane & 7;
  const int mat = lane >> 3;  // which of the four ldmatrix matrices this lane addresses
  const int t = lane & 3;

  // S = Q K^T. For k-step kk, ldmatrix.x4 over K rows gives the B fragments of two 8-token
  // column tiles: matrices (tokens 0-7 | 8-15) x (dims 16kk..+7 | 16kk+8..+15).
  float s[kN][4];
#pragma unroll
  for (int n = 0; n < kN; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
  }
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < kN / 2; ++np) {
      const int row = 16 * np + r8 + ((mat >> 1) << 3);
      const int chunk = 2 * kk + (mat & 1);
      uint32_t b[4];
      LdMatrixX4(b, SmemAddr(sk + Swizzle<kHeadDim>(row, chunk)));
      Mma<T>::Run(s[2 * np], qa[kk], b[0], b[1]);
      Mma<T>::Run(s[2 * np + 1], qa[kk], b[2], b[3]);
    }
  }

  // Mask, scale and fold the tile into the running max / sum of each row.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = kNegInf;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int pos = base + 8 * n + 2 * t + x;
        const float v = pos <= limit[r] ? s[n][2 * r + x] * scale_log2 : kNegInf;
        s[n][2 * r + x] = v;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(st.m[r], mx);
    // A row that has seen no valid key yet keeps m = -inf; exponentiate against 0 instead so
    // that -inf - -inf never makes a NaN (its probabilities are exactly 0).
    const float m_ref = m_new == kNegInf ? 0.f : m_new;
    const float corr = FastExp2(st.m[r] - m_ref);
    st.m[r] = m_new;
    st.l[r] *= corr;
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      st.o[j][2 * r] *= corr;
      st.o[j][2 * r + 1] *= corr;
    }
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const float p = FastExp2(s[n][2 * r + x] - m_ref);
        s[n][2 * r + x] = p;
        st.l[r] += p;
      }
    }
  }

  // O += P V. The C fragments of S column tiles 2kp and 2kp+1 are exactly the A fragment of
  // P for tokens 16kp..16kp+15; ldmatrix.x4.trans over V rows gives the B fragments of two
  // 8-dim output tiles: matrices (tokens 0-7 | 8-15) x (dims 16jp..+7 | 16jp+8..+15).
#pragma unroll
  for (int kp = 0; kp < kTileN / 16; ++kp) {
    const uint32_t pa[4] = {Mma<T>::Pack(s[2 * kp][0], s[2 * kp][1]),
                            Mma<T>::Pack(s[2 * kp][2], s[2 * kp][3]),
                            Mma<T>::Pack(s[2 * kp + 1][0], s[2 * kp + 1][1]),
                            Mma<T>::Pack(s[2 * kp + 1][2], s[2 * kp + 1][3])};
#pragma unroll
    for (int jp = 0; jp < kHeadDim / 16; ++jp) {
      const int row = 16 * kp + r8 + ((mat & 1) << 3);
      const int chunk = 2 * jp + (mat >> 1);
      uint32_t b[4];
      LdMatrixX4Trans(b, SmemAddr(sv + Swizzle<kHeadDim>(row, chunk)));
      Mma<T>::Run(st.o[2 * jp], pa, b[0], b[1]);
      Mma<T>::Run(st.o[2 * jp + 1], pa, b[2], b[3]);
    }
  }
}

}  // namespace pagoda::kernels::cuda
