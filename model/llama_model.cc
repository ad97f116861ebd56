#include "model/llama_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda::model {
namespace {

using kernels::OwnedTensor;
using kernels::Tensor;

// Tensor `name`, which must hold a [rows, cols] matrix (ggml dims {cols, rows}; a vector
// when rows == 1); InvalidArgument when missing or mis-shaped.
absl::StatusOr<const gguf::TensorInfo*> FindMatrix(const gguf::GgufFile& file,
                                                   const std::string& name, int64_t rows,
                                                   int64_t cols) {
  const gguf::TensorInfo* t = file.FindTensor(name);
  if (t == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("model: tensor ", name, " missing"));
  const bool shape_ok = rows == 1
                            ? (t->dims.size() == 1 && t->dims[0] == static_cast<uint64_t>(cols))
                            : (t->dims.size() == 2 && t->dims[0] == static_cast<uint64_t>(cols) &&
                               t->dims[1] == static_cast<uint64_t>(rows));
  if (!shape_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: tensor ", name, " has the wrong shape (want ", rows, " x ", cols, ")"));
  }
  return t;
}

// Reads tensor `name` ([rows, cols], see FindMatrix) as fp32 and appends it to `out`.
absl::Status AppendMatrix(const gguf::GgufFile& file, const std::string& name, int64_t rows,
                          int64_t cols, std::vector<float>* out) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, FindMatrix(file, name, rows, cols));
  const size_t start = out->size();
  out->resize(start + static_cast<size_t>(rows * cols));
  return gguf::DequantizeToF32(*t, absl::MakeSpan(out->data() + start, rows * cols));
}

// Reads the optional 1-D tensors `parts` (name, length) as one f32 row of their summed
// length, a missing part reading as zeros, into fresh backend memory. An empty tensor when
// none of them is in the file; InvalidArgument when one has the wrong shape.
absl::StatusOr<OwnedTensor> LoadOptionalRow(
    const gguf::GgufFile& file, std::initializer_list<std::pair<std::string, int64_t>> parts,
    kernels::Backend* backend) {
  std::vector<float> host;
  bool any = false;
  for (const auto& [name, len] : parts) {
    const size_t at = host.size();
    const gguf::TensorInfo* t = file.FindTensor(name);
    if (t == nullptr) {
      host.resize(at + static_cast<size_t>(len), 0.f);
      continue;
    }
    if (t->dims.size() != 1 || t->dims[0] != static_cast<uint64_t>(len)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: tensor ", name, " has the wrong shape (want ", len, ")"));
    }
    any = true;
    host.resize(at + static_cast<size_t>(len));
    RETURN_IF_ERROR(gguf::DequantizeToF32(*t, absl::MakeSpan(host.data() + at, len)));
  }
  if (!any) return OwnedTensor{};
  const int64_t cols = static_cast<int64_t>(host.size());
  ASSIGN_OR_RETURN(OwnedTensor t, backend->AllocateTensor(kernels::DType::kF32, 1, cols));
  RETURN_IF_ERROR(backend->CopyToDevice(t.view.data, host.data(), host.size() * sizeof(float)));
  return t;
}

// The file bytes of a tensor FindMatrix accepted, checked against its type's size.
absl::StatusOr<const uint8_t*> RawBytes(const gguf::TensorInfo& t) {
  ASSIGN_OR_RETURN(const uint64_t bytes, gguf::TensorBytes(t.type, t.num_elements()));
  if (t.data == nullptr || t.nbytes < bytes) {
    return absl::InvalidArgumentError(absl::StrCat("model: tensor ", t.name, " is truncated"));
  }
  return t.data;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const gguf::GgufFile& file,
                                                             kernels::Backend* backend) {
  ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::FromGguf(file));
  std::unique_ptr<LlamaModel> model(new LlamaModel(std::move(config), backend));
  RETURN_IF_ERROR(model->LoadWeights(file));
  RETURN_IF_ERROR(model->LoadOptionalTensors(file));
  return model;
}

absl::Status LlamaModel::LoadOptionalTensors(const gguf::GgufFile& file) {
  const LlamaConfig& c = config_;
  kernels::Backend* be = backend_;
  if (c.has_rope_freqs) {
    ASSIGN_OR_RETURN(rope_freqs_,
                     LoadOptionalRow(file, {{"rope_freqs.weight", c.rope_dim / 2}}, be));
  }
  if (c.arch == Architecture::kQwen2) {
    ASSIGN_OR_RETURN(output_b_, LoadOptionalRow(file, {{"output.bias", c.vocab_size}}, be));
  }
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    Layer& L = layers_[l];
    ASSIGN_OR_RETURN(L.b_qkv, LoadOptionalRow(file,
                                              {{p + "attn_q.bias", c.q_dim()},
                                               {p + "attn_k.bias", c.kv_dim()},
                                               {p + "attn_v.bias", c.kv_dim()}},
                                              be));
    if (c.arch != Architecture::kLlama) continue;  // qwen2 reads no other bias
    ASSIGN_OR_RETURN(L.b_o, LoadOptionalRow(file, {{p + "attn_output.bias", c.dim}}, be));
    ASSIGN_OR_RETURN(
        L.b_gate_up,
        LoadOptionalRow(file, {{p + "ffn_gate.bias", c.ffn_dim}, {p + "ffn_up.bias", c.ffn_dim}},
                        be));
    ASSIGN_OR_RETURN(L.b_down, LoadOptionalRow(file, {{p + "ffn_down.bias", c.dim}}, be));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::LoadStacked(const gguf::GgufFile& file,
                                     const std::vector<std::pair<std::string, int64_t>>& parts,
                                     int64_t cols, StackedWeight* dst) {
  std::vector<const gguf::TensorInfo*> infos;
  for (const auto& [name, rows] : parts) {
    ASSIGN_OR_RETURN(const gguf::TensorInfo* t, FindMatrix(file, name, rows, cols));
    infos.push_back(t);
  }
  dst->parts.clear();
  const bool same_type = std::all_of(infos.begin(), infos.end(), [&](const gguf::TensorInfo* t) {
    return t->type == infos[0]->type;
  });
  if (same_type && infos.size() > 1) {  // fuse: concatenate the raw rows
    std::vector<uint8_t> bytes;
    int64_t rows = 0;
    for (size_t i = 0; i < infos.size(); ++i) {
      ASSIGN_OR_RETURN(const uint8_t* data, RawBytes(*infos[i]));
      const size_t n =
          kernels::DTypeRowBytes(gguf::ToDType(infos[i]->type), parts[i].second * cols);
      bytes.insert(bytes.end(), data, data + n);
      rows += parts[i].second;
    }
    ASSIGN_OR_RETURN(
        kernels::OwnedTensor w,
        backend_->CreateWeightRaw(gguf::ToDType(infos[0]->type), bytes.data(), rows, cols));
    dst->parts.push_back(std::move(w));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    ASSIGN_OR_RETURN(const uint8_t* data, RawBytes(*infos[i]));
    ASSIGN_OR_RETURN(
        kernels::OwnedTensor w,
        backend_->CreateWeightRaw(gguf::ToDType(infos[i]->type), data, parts[i].second, cols));
    dst->parts.push_back(std::move(w));
  }
  return absl::OkStatus();
}

kernels::RopeParams LlamaModel::MakeRopeParams() const {
  const LlamaConfig& c = config_;
  return {.num_heads = c.num_heads,
          .num_kv_heads = c.num_kv_heads,
          .head_dim = c.head_dim,
          .rope_dim = c.rope_dim,
          .freq_base = c.rope_freq_base,
          .neox = c.rope_neox,
          .freq_factors = rope_freqs_.view,
          .freq_scale = c.rope_freq_scale,
          .ext_factor = c.rope_ext_factor,
          .attn_factor = c.rope_attn_factor,
          .beta_fast = c.rope_beta_fast,
          .beta_slow = c.rope_beta_slow,
          .n_ctx_orig = c.rope_orig_context};
}

absl::Status LlamaModel::LoadWeights(const gguf::GgufFile& file) {
  const LlamaConfig& c = config_;
  std::vector<float> host;
  // Norm vectors: in the backend's weight type, as CreateWeight stores any weight (fp32 on
  // the CPU; on CUDA the activation type, which its RmsNorm kernel reads them as).
  auto load_vector = [&](const std::string& name, OwnedTensor* dst) -> absl::Status {
    host.clear();
    RETURN_IF_ERROR(AppendMatrix(file, name, 1, c.dim, &host));
    ASSIGN_OR_RETURN(*dst, backend_->CreateWeight(host.data(), 1, c.dim));
    return absl::OkStatus();
  };
  // Matrices: kept in their file type by backends that can (CreateWeightRaw).
  auto load_matrix = [&](const std::string& name, int64_t rows, int64_t cols,
                         OwnedTensor* dst) -> absl::Status {
    StackedWeight w;
    RETURN_IF_ERROR(LoadStacked(file, {{name, rows}}, cols, &w));
    *dst = std::move(w.parts[0]);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(load_matrix("token_embd.weight", c.vocab_size, c.dim, &token_embd_));
  RETURN_IF_ERROR(load_vector("output_norm.weight", &output_norm_));
  if (!c.tied_embeddings) {
    RETURN_IF_ERROR(load_matrix("output.weight", c.vocab_size, c.dim, &output_));
  }
  layers_.resize(c.num_layers);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    Layer& L = layers_[l];
    RETURN_IF_ERROR(load_vector(p + "attn_norm.weight", &L.attn_norm));
    RETURN_IF_ERROR(LoadStacked(file,
                                {{p + "attn_q.weight", c.q_dim()},
                                 {p + "attn_k.weight", c.kv_dim()},
                                 {p + "attn_v.weight", c.kv_dim()}},
                                c.dim, &L.wqkv));
    RETURN_IF_ERROR(load_matrix(p + "attn_output.weight", c.dim, c.q_dim(), &L.wo));
    RETURN_IF_ERROR(load_vector(p + "ffn_norm.weight", &L.ffn_norm));
    RETURN_IF_ERROR(
        LoadStacked(file, {{p + "ffn_gate.weight", c.ffn_dim}, {p + "ffn_up.weight", c.ffn_dim}},
                    c.dim, &L.w_gate_up));
    RETURN_IF_ERROR(load_matrix(p + "ffn_down.weight", c.dim, c.ffn_dim, &L.w_down));
    // The layer's matrices are only ever MatMul's weights: the backend may re-lay them out.
    for (OwnedTensor* w : {&L.wo, &L.w_down}) RETURN_IF_ERROR(backend_->PrepareMatMulWeight(w));
    for (StackedWeight* s : {&L.wqkv, &L.w_gate_up}) {
      for (OwnedTensor& w : s->parts) RETURN_IF_ERROR(backend_->PrepareMatMulWeight(&w));
    }
    for (const OwnedTensor& w : L.wqkv.parts) backend_->NameWeight(w.view, "qkv");
    backend_->NameWeight(L.wo.view, "o");
    for (const OwnedTensor& w : L.w_gate_up.parts) backend_->NameWeight(w.view, "gate_up");
    backend_->NameWeight(L.w_down.view, "down");
  }
  // A tied head is also the embedding table, which Embed reads row by row as stored: the head
  // starts as a view of it, and where the backend re-lays product weights out (the CPU's
  // interleaved layouts) it gets its own copy in that layout, as llama.cpp duplicates a tied
  // output tensor for its repacked buffers (the 128k-row head of a 1B model is ~29% of a
  // 16-stream decode step on the row-run kernel).
  if (c.tied_embeddings) output_.view = token_embd_.view;
  RETURN_IF_ERROR(backend_->PrepareMatMulWeight(&output_));
  backend_->NameWeight(output_.view, "lm_head");
  return absl::OkStatus();
}

void LlamaModel::MatMulStacked(const Tensor& x, const StackedWeight& w, const Tensor& out) {
  int64_t col = 0;
  for (const OwnedTensor& part : w.parts) {
    backend_->MatMul(x, part.view, out.Cols(col, part.view.rows));
    col += part.view.rows;
  }
}

namespace {

// A fresh workspace generation, unique in the process (across models too).
uint64_t NextGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

absl::Status LlamaModel::EnsureWorkspace(int64_t tokens, int64_t logit_rows) {
  const kernels::DType dt = backend_->activation_dtype();
  const LlamaConfig& c = config_;
  if (tokens > ws_.tokens || logit_rows > ws_.logit_rows) ws_.generation = NextGeneration();
  if (tokens > ws_.tokens) {
    const int64_t n = std::max(tokens, ws_.tokens * 2);
    ASSIGN_OR_RETURN(ws_.x, backend_->AllocateTensor(dt, n, c.dim));
    ASSIGN_OR_RETURN(ws_.xn, backend_->AllocateTensor(dt, n, c.dim));
    ASSIGN_OR_RETURN(ws_.qkv, backend_->AllocateTensor(dt, n, c.q_dim() + 2 * c.kv_dim()));
    ASSIGN_OR_RETURN(ws_.attn, backend_->AllocateTensor(dt, n, c.q_dim()));
    ASSIGN_OR_RETURN(ws_.gate_up, backend_->AllocateTensor(dt, n, 2 * int64_t{c.ffn_dim}));
    ASSIGN_OR_RETURN(ws_.act, backend_->AllocateTensor(dt, n, c.ffn_dim));
    ASSIGN_OR_RETURN(ws_.proj, backend_->AllocateTensor(dt, n, c.dim));
    ws_.tokens = n;
  }
  if (logit_rows > ws_.logit_rows) {
    const int64_t n = std::max(logit_rows, ws_.logit_rows * 2);
    ASSIGN_OR_RETURN(ws_.last, backend_->AllocateTensor(dt, n, c.dim));
    ASSIGN_OR_RETURN(ws_.last_norm, backend_->AllocateTensor(dt, n, c.dim));
    // Logits stay fp32 whatever the activation type: sampling wants the precision.
    ASSIGN_OR_RETURN(ws_.logits, backend_->AllocateTensor(kernels::DType::kF32, n, c.vocab_size));
    ws_.logit_rows = n;
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::ValidateBatch(const kernels::BatchInput& b,
                                       const kernels::PagedKvCache& cache) const {
  const int32_t n = b.num_tokens();
  if (n == 0 || b.positions.size() != static_cast<size_t>(n) ||
      b.slot_mapping.size() != static_cast<size_t>(n) ||
      b.query_start_loc.size() != static_cast<size_t>(b.num_seqs() + 1) ||
      b.query_start_loc.front() != 0 || b.query_start_loc.back() != n ||
      b.block_tables.size() != static_cast<size_t>(b.num_seqs()) * b.max_blocks_per_seq) {
    return absl::InvalidArgumentError("model: inconsistent batch metadata");
  }
  for (int32_t id : b.token_ids) {
    if (id < 0 || id >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("model: token id ", id, " outside vocabulary"));
    }
  }
  for (int32_t row : b.logits_indices) {
    if (row < 0 || row >= n) return absl::InvalidArgumentError("model: bad logits index");
  }
  const int64_t slots = int64_t{cache.shape.num_blocks} * cache.shape.block_size;
  for (int32_t s = 0; s < b.num_seqs(); ++s) {
    const int32_t q_len = b.query_start_loc[s + 1] - b.query_start_loc[s];
    if (q_len < 0 || b.seq_lens[s] < q_len ||
        b.seq_lens[s] > int64_t{b.max_blocks_per_seq} * cache.shape.block_size) {
      return absl::InvalidArgumentError("model: sequence length outside its block table");
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    if (b.slot_mapping[i] >= slots || b.positions[i] < 0) {
      return absl::InvalidArgumentError("model: slot or position out of range");
    }
  }
  for (int32_t block : b.block_tables) {
    if (block < 0 || block >= cache.shape.num_blocks) {
      return absl::InvalidArgumentError("model: block id out of range");
    }
  }
  return absl::OkStatus();
}

void LlamaModel::RunLayer(int32_t index, const kernels::PagedKvCache& cache, int64_t n) {
  const LlamaConfig& c = config_;
  const Layer& L = layers_[index];
  kernels::Backend& be = *backend_;
  const Tensor x = ws_.x.view.Rows(0, n);
  const Tensor xn = ws_.xn.view.Rows(0, n);
  const Tensor qkv = ws_.qkv.view.Rows(0, n);
  const Tensor q = qkv.Cols(0, c.q_dim());
  const Tensor k = qkv.Cols(c.q_dim(), c.kv_dim());
  const Tensor v = qkv.Cols(c.q_dim() + c.kv_dim(), c.kv_dim());
  const Tensor attn = ws_.attn.view.Rows(0, n);
  const Tensor proj = ws_.proj.view.Rows(0, n);
  const Tensor gate_up = ws_.gate_up.view.Rows(0, n);
  const Tensor act = ws_.act.view.Rows(0, n);

  be.RmsNorm(x, L.attn_norm.view, c.rms_eps, xn);
  MatMulStacked(xn, L.wqkv, qkv);
  if (L.b_qkv.view.data != nullptr) be.AddBias(qkv, L.b_qkv.view);
  be.Rope(q, k, MakeRopeParams());
  be.WriteKv(k, v, cache, index);
  be.Attention(q, cache, index,
               {.num_heads = c.num_heads,
                .num_kv_heads = c.num_kv_heads,
                .head_dim = c.head_dim,
                .scale = 1.f / std::sqrt(static_cast<float>(c.head_dim))},
               attn);
  be.MatMul(attn, L.wo.view, proj);
  if (L.b_o.view.data != nullptr) be.AddBias(proj, L.b_o.view);
  be.Add(x, proj);
  be.RmsNorm(x, L.ffn_norm.view, c.rms_eps, xn);
  MatMulStacked(xn, L.w_gate_up, gate_up);
  if (L.b_gate_up.view.data != nullptr) be.AddBias(gate_up, L.b_gate_up.view);
  be.SiluMul(gate_up.Cols(0, c.ffn_dim), gate_up.Cols(c.ffn_dim, c.ffn_dim), act);
  be.MatMul(act, L.w_down.view, proj);
  if (L.b_down.view.data != nullptr) be.AddBias(proj, L.b_down.view);
  be.Add(x, proj);
}

absl::Status LlamaModel::Forward(const kernels::BatchInput& batch,
                                 const kernels::PagedKvCache& cache, float* logits) {
  RETURN_IF_ERROR(ValidateBatch(batch, cache));
  // A decode step the backend records runs padded to its bucket (PadDecodeBatch): the
  // added rows are independent of the real ones (every op is per row, or per sequence
  // for attention) and their logits are not read.
  const kernels::BatchInput* run = &batch;
  if (IsPlainDecode(batch) && backend_->RecordableBatchSize(batch.num_seqs()) > batch.num_seqs()) {
    PadDecodeBatch(batch, backend_->RecordableBatchSize(batch.num_seqs()), &padded_batch_);
    run = &padded_batch_;
  }
  const int64_t n = run->num_tokens();
  const int64_t rows = run->num_logits();
  RETURN_IF_ERROR(EnsureWorkspace(n, std::max<int64_t>(rows, 1)));
  RETURN_IF_ERROR(backend_->PrepareBatch(*run));
  // The final norm is row-wise, so only the rows that need logits go through it.
  const Tensor last = ws_.last.view.Rows(0, rows);
  const Tensor last_norm = ws_.last_norm.view.Rows(0, rows);
  const Tensor out = ws_.logits.view.Rows(0, rows);
  // The ops below read this model's weights and workspace (the generation names both: it is
  // unique in the process and changes whenever a buffer does), the cache and the row counts:
  // a backend may replay them for another batch of the same shape under the same key (CUDA
  // graphs of decode steps).
  const kernels::KvCacheShape& s = cache.shape;
  const uint64_t key =
      absl::HashOf(ws_.generation, cache.data, s.num_layers, s.num_blocks, s.block_size,
                   s.num_kv_heads, s.head_dim, static_cast<int>(s.dtype), s.fp8_scale, n, rows);
  RETURN_IF_ERROR(backend_->RunRecordable(key, [&] {
    backend_->Embed(token_embd_.view, ws_.x.view.Rows(0, n));
    for (int32_t l = 0; l < config_.num_layers; ++l) RunLayer(l, cache, n);
    if (rows == 0) return;
    backend_->GatherLogitRows(ws_.x.view.Rows(0, n), last);
    backend_->RmsNorm(last, output_norm_.view, config_.rms_eps, last_norm);
    backend_->MatMul(last_norm, output_.view, out);
    if (output_b_.view.data != nullptr) backend_->AddBias(out, output_b_.view);
  }));
  if (rows == 0) return backend_->Synchronize();
  return backend_->ReadF32(out.Rows(0, batch.num_logits()), logits);
}

}  // namespace pagoda::model
