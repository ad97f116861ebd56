#!/usr/bin/env python3
"""Dequantization references (uses gguf-py).

  PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 make_quant_ref.py source TOKENIZER_GGUF OUT_GGUF
      Writes a small random F32 llama GGUF whose 2-D tensors all have row lengths that
      are multiples of 256: dim 256, 1 layer, 4 heads, 4 KV heads, ffn 512, vocab 512
      (tokenizer.* metadata copied from TOKENIZER_GGUF, e.g. stories260K.gguf).
      Weights: numpy default_rng(20251201) standard normal * 0.05; norm weights 1.0.

  PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 make_quant_ref.py dequant QUANT_GGUF OUT_PREFIX TENSOR...
      For each TENSOR writes OUT_PREFIX.TENSOR.f32: gguf.quants.dequantize() of its data,
      raw little-endian float32, row-major (ne[0] = row length fastest).
"""
from __future__ import annotations

import sys

import numpy as np
import gguf

DIM, N_LAYER, N_HEAD, N_HEAD_KV, FFN, VOCAB = 256, 1, 4, 4, 512, 512
SEED = 20251201


def make_source(tok_src: str, out: str) -> None:
    reader = gguf.GGUFReader(tok_src)
    writer = gguf.GGUFWriter(out, 'llama')
    writer.add_name('pagoda-quant-ref')
    writer.add_context_length(256)
    writer.add_embedding_length(DIM)
    writer.add_feed_forward_length(FFN)
    writer.add_block_count(N_LAYER)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(DIM // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for field in reader.fields.values():
        if not field.name.startswith('tokenizer.'):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)

    rng = np.random.default_rng(SEED)

    def rand(rows: int, cols: int) -> np.ndarray:
        # numpy shape (rows, cols): GGUF ne = [cols, rows], row length = cols
        return (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)

    kv = DIM // N_HEAD * N_HEAD_KV
    tensors = [
        ('token_embd.weight', rand(VOCAB, DIM)),
        ('output_norm.weight', np.ones(DIM, dtype=np.float32)),
        ('output.weight', rand(VOCAB, DIM)),
    ]
    for i in range(N_LAYER):
        tensors += [
            (f'blk.{i}.attn_norm.weight', np.ones(DIM, dtype=np.float32)),
            (f'blk.{i}.attn_q.weight', rand(DIM, DIM)),
            (f'blk.{i}.attn_k.weight', rand(kv, DIM)),
            (f'blk.{i}.attn_v.weight', rand(kv, DIM)),
            (f'blk.{i}.attn_output.weight', rand(DIM, DIM)),
            (f'blk.{i}.ffn_norm.weight', np.ones(DIM, dtype=np.float32)),
            (f'blk.{i}.ffn_gate.weight', rand(FFN, DIM)),
            (f'blk.{i}.ffn_up.weight', rand(FFN, DIM)),
            (f'blk.{i}.ffn_down.weight', rand(DIM, FFN)),
        ]
    for name, arr in tensors:
        writer.add_tensor(name, arr)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def dequant(path: str, prefix: str, names: list[str]) -> None:
    reader = gguf.GGUFReader(path)
    by_name = {t.name: t for t in reader.tensors}
    for name in names:
        t = by_name[name]
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype('<f4')
        out = f'{prefix}.{name}.f32'
        values.tofile(out)
        print(f'{out}: {t.tensor_type.name} ne={list(map(int, t.shape))} -> {values.shape}')


def main() -> None:
    if sys.argv[1] == 'source':
        make_source(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == 'dequant':
        dequant(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == '__main__':
    main()
