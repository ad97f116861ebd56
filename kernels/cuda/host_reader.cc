#include "kernels/cuda/host_reader.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_util.h"

namespace pagoda::kernels::cuda {

bool IsPinnedHost(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // pageable memory may be reported as an error by old drivers
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

HostReader::~HostReader() {
  for (int i = 0; i < 2; ++i) {
    if (landed_[i] != nullptr) {
      cudaEventSynchronize(landed_[i]);
      cudaEventDestroy(landed_[i]);
    }
    if (staging_[i] != nullptr) cudaFreeHost(staging_[i]);
  }
}

absl::Status HostReader::EnsureStaging() {
  for (int i = 0; i < 2; ++i) {
    if (staging_[i] == nullptr) {
      void* p = nullptr;
      if (absl::Status st = CudaStatus(cudaMallocHost(&p, kChunkBytes), "pinned staging alloc");
          !st.ok()) {
        return st;
      }
      staging_[i] = static_cast<char*>(p);
    }
    if (landed_[i] == nullptr) {
      if (absl::Status st = CudaStatus(
              cudaEventCreateWithFlags(&landed_[i], cudaEventDisableTiming), "event create");
          !st.ok()) {
        landed_[i] = nullptr;
        return st;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HostReader::QueueChunk(int slot, const void* src, size_t src_pitch, size_t row_bytes,
                                    int64_t first, int64_t count, cudaStream_t stream) {
  const char* from = static_cast<const char*>(src) + static_cast<size_t>(first) * src_pitch;
  if (absl::Status st =
          CudaStatus(cudaMemcpy2DAsync(staging_[slot], row_bytes, from, src_pitch, row_bytes,
                                       static_cast<size_t>(count), cudaMemcpyDeviceToHost, stream),
                     "read");
      !st.ok()) {
    return st;
  }
  return CudaStatus(cudaEventRecord(landed_[slot], stream), "read event");
}

absl::Status HostReader::Read(void* dst, const void* src, size_t src_pitch, size_t row_bytes,
                              int64_t rows, cudaStream_t stream) {
  if (rows <= 0 || row_bytes == 0) return CudaStatus(cudaStreamSynchronize(stream), "read sync");
  if (IsPinnedHost(dst)) {
    ++direct_reads_;
    if (absl::Status st =
            CudaStatus(cudaMemcpy2DAsync(dst, row_bytes, src, src_pitch, row_bytes,
                                         static_cast<size_t>(rows), cudaMemcpyDeviceToHost, stream),
                       "read");
        !st.ok()) {
      return st;
    }
    return CudaStatus(cudaStreamSynchronize(stream), "read sync");
  }
  ++staged_reads_;
  if (absl::Status st = EnsureStaging(); !st.ok()) return st;
  // A row longer than a chunk is read as several narrower "rows" of its columns.
  if (row_bytes > kChunkBytes) {
    const size_t parts = (row_bytes + kChunkBytes - 1) / kChunkBytes;
    for (int64_t r = 0; r < rows; ++r) {
      for (size_t part = 0; part < parts; ++part) {
        const size_t at = part * kChunkBytes;
        const size_t len = std::min(kChunkBytes, row_bytes - at);
        absl::Status st =
            Read(static_cast<char*>(dst) + r * row_bytes + at,
                 static_cast<const char*>(src) + r * src_pitch + at, len, len, 1, stream);
        if (!st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }
  const int64_t chunk_rows = static_cast<int64_t>(kChunkBytes / row_bytes);
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  auto count_of = [&](int64_t c) { return std::min(chunk_rows, rows - c * chunk_rows); };
  for (int64_t c = 0; c < std::min<int64_t>(chunks, 2); ++c) {
    absl::Status st = QueueChunk(static_cast<int>(c), src, src_pitch, row_bytes, c * chunk_rows,
                                 count_of(c), stream);
    if (!st.ok()) return st;
  }
  for (int64_t c = 0; c < chunks; ++c) {
    const int slot = static_cast<int>(c & 1);
    if (absl::Status st = CudaStatus(cudaEventSynchronize(landed_[slot]), "read wait"); !st.ok()) {
      return st;
    }
    std::memcpy(static_cast<char*>(dst) + static_cast<size_t>(c * chunk_rows) * row_bytes,
                staging_[slot], static_cast<size_t>(count_of(c)) * row_bytes);
    if (c + 2 < chunks) {
      absl::Status st = QueueChunk(slot, src, src_pitch, row_bytes, (c + 2) * chunk_rows,
                                   count_of(c + 2), stream);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda::kernels::cuda
