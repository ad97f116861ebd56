#!/usr/bin/env python3
"""Make variants of stories260K.gguf (F32) for llama.cpp reference runs.

  PYTHONPATH=/tmp/llama.cpp/gguf-py:/work/refdata/scripts /usr/bin/python3 \
      make_variants.py SRC_GGUF OUT_DIR

Writes into OUT_DIR:
  stories260K-rope-freqs.gguf  + rope_freqs.weight (Llama 3.1 factors, see below),
                                 llama.context_length = 4096
  stories260K-qwen2.gguf       general.architecture = qwen2, llama.* keys renamed
                                 qwen2.*, + blk.N.attn_{q,k,v}.bias (seed 1234, N(0,1)*0.1)
  stories260K-linear.gguf      llama.rope.scaling.type = linear, factor 4
  stories260K-yarn.gguf        llama.rope.scaling.type = yarn, factor 4,
                                 llama.rope.scaling.original_context_length = 128
"""
from __future__ import annotations

import math
import sys

import numpy as np
import gguf

from gguf_copy import copy_gguf

T = gguf.GGUFValueType

# Llama 3.1 ("llama3" rope_type) parameters; original context 128 instead of
# 8192 so that with head_dim 8 / freq_base 10000 the factors are not all 1.
ROPE_FACTOR = 8.0
LOW_FREQ_FACTOR = 1.0
HIGH_FREQ_FACTOR = 4.0
OLD_CONTEXT_LEN = 128
FREQ_BASE = 10000.0
HEAD_DIM = 8


def llama3_rope_factors() -> np.ndarray:
    """The formula of llama.cpp's HF converter (conversion/llama.py), in float32 freqs."""
    freqs = 1.0 / (FREQ_BASE ** (np.arange(0, HEAD_DIM, 2, dtype=np.float32) / HEAD_DIM))
    low_freq_wavelen = OLD_CONTEXT_LEN / LOW_FREQ_FACTOR
    high_freq_wavelen = OLD_CONTEXT_LEN / HIGH_FREQ_FACTOR
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(freq)
        if wavelen < high_freq_wavelen:
            out.append(1.0)
        elif wavelen > low_freq_wavelen:
            out.append(ROPE_FACTOR)
        else:
            smooth = (OLD_CONTEXT_LEN / wavelen - LOW_FREQ_FACTOR) / (HIGH_FREQ_FACTOR - LOW_FREQ_FACTOR)
            out.append(1 / ((1 - smooth) / ROPE_FACTOR + smooth))
    return np.array(out, dtype=np.float32)


def main() -> None:
    src, out = sys.argv[1], sys.argv[2]

    factors = llama3_rope_factors()
    print('rope_freqs factors:', factors.tolist())
    copy_gguf(src, f'{out}/stories260K-rope-freqs.gguf',
              set_kv={'llama.context_length': (4096, T.UINT32)},
              extra_tensors=[('rope_freqs.weight', factors)])

    rng = np.random.default_rng(1234)
    n_layer, n_embd, n_embd_kv = 5, 64, 32
    biases = []
    for i in range(n_layer):
        biases.append((f'blk.{i}.attn_q.bias', (rng.standard_normal(n_embd) * 0.1).astype(np.float32)))
        biases.append((f'blk.{i}.attn_k.bias', (rng.standard_normal(n_embd_kv) * 0.1).astype(np.float32)))
        biases.append((f'blk.{i}.attn_v.bias', (rng.standard_normal(n_embd_kv) * 0.1).astype(np.float32)))
    copy_gguf(src, f'{out}/stories260K-qwen2.gguf', arch='qwen2',
              rename_prefix=('llama.', 'qwen2.'), extra_tensors=biases)

    copy_gguf(src, f'{out}/stories260K-linear.gguf',
              set_kv={'llama.rope.scaling.type': ('linear', T.STRING),
                      'llama.rope.scaling.factor': (4.0, T.FLOAT32)})
    copy_gguf(src, f'{out}/stories260K-yarn.gguf',
              set_kv={'llama.rope.scaling.type': ('yarn', T.STRING),
                      'llama.rope.scaling.factor': (4.0, T.FLOAT32),
                      'llama.rope.scaling.original_context_length': (128, T.UINT32)})


if __name__ == '__main__':
    main()
