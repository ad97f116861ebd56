#!/usr/bin/env python3
"""A float64 Llama forward pass in plain Python, independent of pagoda's C++ code.

It reads a GGUF file (F32/F16 tensors), runs greedy decoding with exact arithmetic and
prints the top-N log-probabilities of each step. Architectures llama and qwen2 (NEOX RoPE,
q/k/v biases), with rope_freqs.weight and linear / YaRN rope scaling as llama.cpp applies
them. With --pagoda it also runs
`pagoda generate --json --logprobs N` on the same prompt and checks that the tokens are
identical and every logprob agrees within --tolerance: a check of the whole C++ forward
pass (RoPE layout, GQA mapping, norms, attention) against first principles. Only for small
models: it is slow.
"""
import argparse
import json
import math
import struct
import subprocess
import sys

SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self.data[:4] != b"GGUF":
            raise ValueError("not a GGUF file")
        self.pos = 4
        self.version = self._read("I")
        n_tensors, n_kv = self._read("Q"), self._read("Q")
        self.meta = {}
        for _ in range(n_kv):
            key = self._string().decode()
            self.meta[key] = self._value(self._read("I"))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string().decode()
            dims = [self._read("Q") for _ in range(self._read("I"))]
            ttype, offset = self._read("I"), self._read("Q")
            self.tensors[name] = (dims, ttype, offset)
        align = self.meta.get("general.alignment", 32)
        self.base = (self.pos + align - 1) // align * align

    def _read(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return v

    def _string(self):
        n = self._read("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def _value(self, t):
        if t == 8:
            return self._string()
        if t == 9:
            et, n = self._read("I"), self._read("Q")
            return [self._value(et) for _ in range(n)]
        return self._read(SCALAR[t])

    def matrix(self, name):
        """The tensor as a list of rows (ggml dims[0] is the row length)."""
        dims, ttype, offset = self.tensors[name]
        n = math.prod(dims)
        fmt = {0: "f", 1: "e"}.get(ttype)
        if fmt is None:
            raise ValueError(f"{name}: only F32/F16 tensors are supported here")
        vals = struct.unpack_from(f"<{n}{fmt}", self.data, self.base + offset)
        if len(dims) == 1:
            return list(vals)
        c = dims[0]
        return [list(vals[r * c:(r + 1) * c]) for r in range(n // c)]


class Llama:
    def __init__(self, g):
        arch = g.meta["general.architecture"].decode()
        if arch not in ("llama", "qwen2"):
            raise ValueError(f"unsupported architecture {arch}")
        a = arch + "."
        self.dim = g.meta[a + "embedding_length"]
        self.n_layers = g.meta[a + "block_count"]
        self.n_heads = g.meta[a + "attention.head_count"]
        self.n_kv = g.meta.get(a + "attention.head_count_kv", self.n_heads)
        self.hd = self.dim // self.n_heads
        self.rope_dim = g.meta.get(a + "rope.dimension_count", self.hd)
        self.base = g.meta.get(a + "rope.freq_base", 10000.0)
        self.eps = g.meta.get(a + "attention.layer_norm_rms_epsilon", 1e-5)
        # RoPE as ggml_rope_ext defines it, with llama.cpp's parameters for this file:
        # NEOX pairs for qwen2, rope_freqs divisors (llama), linear or YaRN scaling.
        self.neox = arch == "qwen2"
        scaling = g.meta.get(a + "rope.scaling.type", b"linear").decode()
        factor = g.meta.get(a + "rope.scaling.factor", g.meta.get(a + "rope.scale_linear", 0.0))
        self.freq_scale = 1.0 if scaling == "none" or factor == 0 else 1.0 / factor
        self.ext_factor = 1.0 if scaling == "yarn" else 0.0
        # YaRN's magnitude scale is cancelled by llama.cpp before ggml applies it again.
        self.attn_factor = g.meta.get(a + "rope.scaling.attn_factor", 1.0)
        n_orig = g.meta.get(a + "rope.scaling.original_context_length",
                            g.meta.get(a + "context_length", 2048))

        def corr_dim(rotations):
            return (self.rope_dim * math.log(n_orig / (rotations * 2 * math.pi))
                    / (2 * math.log(self.base)))
        self.corr = (max(0.0, math.floor(corr_dim(32))),
                     min(self.rope_dim - 1.0, math.ceil(corr_dim(1))))
        self.freq_factors = (g.matrix("rope_freqs.weight")
                             if arch == "llama" and "rope_freqs.weight" in g.tensors else None)
        self.embed = g.matrix("token_embd.weight")
        self.out = g.matrix("output.weight") if "output.weight" in g.tensors else self.embed
        self.out_norm = g.matrix("output_norm.weight")
        names = ["attn_q", "attn_k", "attn_v", "attn_output", "attn_norm", "ffn_gate",
                 "ffn_down", "ffn_up", "ffn_norm"]
        self.layers = [{n: g.matrix(f"blk.{l}.{n}.weight") for n in names}
                       for l in range(self.n_layers)]
        for l, w in enumerate(self.layers):
            for n in ("attn_q", "attn_k", "attn_v"):
                name = f"blk.{l}.{n}.bias"
                if name in g.tensors:
                    w[n + "_b"] = g.matrix(name)
        self.k_cache = [[] for _ in range(self.n_layers)]
        self.v_cache = [[] for _ in range(self.n_layers)]

    def _proj(self, w, n, x):
        y = self._mv(w[n], x)
        return [a + b for a, b in zip(y, w[n + "_b"])] if n + "_b" in w else y

    @staticmethod
    def _mv(w, x):
        return [math.fsum(a * b for a, b in zip(row, x)) for row in w]

    def _rms(self, x, w):
        scale = 1.0 / math.sqrt(math.fsum(v * v for v in x) / len(x) + self.eps)
        return [v * scale * ww for v, ww in zip(x, w)]

    def _rope(self, v, pos, heads):
        # `llama` rotates pairs (2i, 2i+1) of each head, qwen2 (NEOX) pairs (i, i + d/2).
        out = list(v)
        half = self.rope_dim // 2
        for h in range(heads):
            for i in range(half):
                extrap = pos * self.base ** (-2.0 * i / self.rope_dim)
                if self.freq_factors is not None:
                    extrap /= self.freq_factors[i]
                th = self.freq_scale * extrap
                mscale = self.attn_factor
                if self.ext_factor != 0:
                    y = (i - self.corr[0]) / max(0.001, self.corr[1] - self.corr[0])
                    mix = (1 - min(1.0, max(0.0, y))) * self.ext_factor
                    th = th * (1 - mix) + extrap * mix
                    mscale *= 1 + 0.1 * math.log(1 / self.freq_scale)
                c, s = math.cos(th) * mscale, math.sin(th) * mscale
                ia = h * self.hd + (i if self.neox else 2 * i)
                ib = ia + (half if self.neox else 1)
                out[ia] = v[ia] * c - v[ib] * s
                out[ib] = v[ia] * s + v[ib] * c
        return out

    def _attention(self, l, q):
        group = self.n_heads // self.n_kv
        out = [0.0] * (self.n_heads * self.hd)
        for h in range(self.n_heads):
            g = h // group
            qh = q[h * self.hd:(h + 1) * self.hd]
            scores = [math.fsum(a * b for a, b in zip(qh, k[g * self.hd:(g + 1) * self.hd]))
                      / math.sqrt(self.hd) for k in self.k_cache[l]]
            m = max(scores)
            e = [math.exp(s - m) for s in scores]
            z = math.fsum(e)
            for t, v in enumerate(self.v_cache[l]):
                for d in range(self.hd):
                    out[h * self.hd + d] += e[t] / z * v[g * self.hd + d]
        return out

    def step(self, token, pos):
        """Logits after feeding `token` at position `pos`."""
        x = list(self.embed[token])
        for l, w in enumerate(self.layers):
            xn = self._rms(x, w["attn_norm"])
            q = self._rope(self._proj(w, "attn_q", xn), pos, self.n_heads)
            self.k_cache[l].append(self._rope(self._proj(w, "attn_k", xn), pos, self.n_kv))
            self.v_cache[l].append(self._proj(w, "attn_v", xn))
            x = [a + b for a, b in zip(x, self._mv(w["attn_output"], self._attention(l, q)))]
            xn = self._rms(x, w["ffn_norm"])
            gate, up = self._mv(w["ffn_gate"], xn), self._mv(w["ffn_up"], xn)
            act = [g / (1.0 + math.exp(-g)) * u for g, u in zip(gate, up)]
            x = [a + b for a, b in zip(x, self._mv(w["ffn_down"], act))]
        return self._mv(self.out, self._rms(x, self.out_norm))


def greedy(model, prompt, steps, top_n):
    for i, t in enumerate(prompt):
        logits = model.step(t, i)
    result = []
    for s in range(steps):
        m = max(logits)
        log_z = m + math.log(math.fsum(math.exp(v - m) for v in logits))
        order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
        result.append({"chosen": order[0],
                       "top": [[i, logits[i] - log_z] for i in order[:top_n]]})
        if s + 1 < steps:
            logits = model.step(order[0], len(prompt) + s)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt-ids", default="1,403,407,261,378",
                   help="prompt token ids for the reference alone")
    p.add_argument("--prompt", default="Once upon a time",
                   help="prompt text given to pagoda; the reference uses pagoda's token ids")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--pagoda", help="pagoda binary to check against")
    p.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args()
    if not args.pagoda:
        prompt = [int(t) for t in args.prompt_ids.split(",")]
        json.dump(greedy(Llama(Gguf(args.model)), prompt, args.steps, args.top), sys.stdout,
                  indent=1)
        return 0
    out = subprocess.run([args.pagoda, "generate", "--model", args.model, "--prompt",
                          args.prompt, "--temperature", "0", "--max-tokens", str(args.steps),
                          "--logprobs", str(args.top), "--ignore-eos", "--json",
                          "--threads", "1", "--kv-cache-dtype", "f32"],
                         check=True, capture_output=True, text=True)
    got = json.loads(out.stdout)
    ref = greedy(Llama(Gguf(args.model)), got["prompt_token_ids"], args.steps, args.top)
    worst = 0.0
    for s, (r, g) in enumerate(zip(ref, got["logprobs"])):
        if g["token_id"] != r["chosen"]:
            print(f"step {s}: pagoda chose {g['token_id']}, reference {r['chosen']}")
            return 1
        for (rid, rlp), (gid, glp) in zip(r["top"], g["top"]):
            if rid != gid:
                print(f"step {s}: top tokens differ: {r['top']} vs {g['top']}")
                return 1
            worst = max(worst, abs(rlp - glp))
    print(f"{len(ref)} steps agree; largest logprob difference {worst:.2e}")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
