#!/usr/bin/env bash
# Regenerates the hand-made seed corpus in fuzz/corpus/ (committed; run only to change it).
# Usage: fuzz/make_corpus.sh BUILD_DIR   (a PAGODA_FUZZ=ON build with write_gguf_seeds built)
set -euo pipefail
build=$(realpath "$1")
cd "$(dirname "$0")"
c=corpus

# GGUF: the hand-made files, and stories260K cut inside its token list and inside its
# tensor infos.
mkdir -p $c/gguf_fuzzer
"$build/fuzz/write_gguf_seeds" $c/gguf_fuzzer
head -c 4096 ../tests/data/stories260K.gguf > $c/gguf_fuzzer/stories260K-4k
head -c 16384 ../tests/data/stories260K.gguf > $c/gguf_fuzzer/stories260K-16k

# Tokenizers: byte 0 picks the vocabulary (low bits) and BOS (0x80); the rest is text.
tok() { mkdir -p "$c/$1"; printf "$3" > "$c/$1/$2"; }
for t in tokenizer_spm_fuzzer tokenizer_bpe_fuzzer; do
  tok $t plain '\x00Hello world, how are you?'
  tok $t bos-special '\x81<s>[INST] Hi there [/INST] </s><unk>'
  tok $t unicode '\x02  \n\t\xc3\xbcn\xc3\xafc\xc3\xb6d\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99 !!'
  tok $t chat '\x83<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|im_start|>x<|im_end|>'
  tok $t digits '\x04 12345678 3.14159 1,000,000 0x1F'
  tok $t invalid-utf8 '\x05a\xff\xfe\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80z'
  tok $t contractions "\\x06I'm sure you've SEEN it, they'LL say IT's fine."
done

# Requests: text protos encoded with protoc as internal.RawGenerateRequest.
mkdir -p $c/request_fuzzer
req() {
  printf '%s\n' "$2" | protoc -I../proto --encode=pagoda.internal.RawGenerateRequest \
    ../proto/pagoda/internal/raw_generate_request.proto > "$c/request_fuzzer/$1"
}
req text 'prompt: "Once upon a time" max_tokens: 4'
req ids 'prompt_token_ids: [1, 400, 20] max_tokens: 2 temperature: 0'
req sampling 'prompt: "Hi" temperature: 0.7 top_k: 40 top_p: 0.9 min_p: 0.05 repetition_penalty: 1.1 presence_penalty: 0.5 frequency_penalty: -0.5 seed: 7 logprobs: 3'
req stops 'prompt: "a" stop: ["the", "\n"] stop_token_ids: [2] ignore_eos: true priority: -3 parse_special: false'
req bad 'prompt: "x" temperature: -1 top_p: 0 logprobs: 99 max_tokens: -5'
req tiny-temp 'prompt: "x" temperature: 1e-45 min_p: 0.5 request_id: "r-1"'

# Chat templates: byte 0 picks the conversation (low 2 bits), add_generation_prompt (0x04),
# strip_leading_bos (0x08), tools (0x10), enable_thinking=false (0x20); the rest is the
# template. Six real templates of tests/data (each under 5 KB) and the hostile templates
# of issue 23, which each meet a budget.
mkdir -p $c/chat_template_fuzzer
tmp=$(mktemp -d)
tar -xJf ../tests/data/chat_templates.tar.xz -C "$tmp"
real() { { printf "$2"; cat "$tmp/chat_templates/$1.jinja"; } > "$c/chat_template_fuzzer/$1"; }
real google-gemma-2-2b-it '\x07'
real microsoft-Phi-3.5-mini-instruct '\x06'
real Qwen-Qwen2.5-7B-Instruct '\x17'
real meta-llama-Llama-3.1-8B-Instruct '\x1f'
real deepseek-ai-DeepSeek-R1-Distill-Qwen-32B '\x07'
real NousResearch-Hermes-3-Llama-3.1-8B-tool_use '\x17'
rm -rf "$tmp"
hostile() { { printf '\x03'; printf '%s' "$2"; } > "$c/chat_template_fuzzer/$1"; }
hostile deep-list '{% set ns = namespace(x=[]) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson }}'
hostile indent "{{ 'x'|indent(-1) }}{{ 'a\nb'|indent(100000000000) }}"
hostile repeat "{{ 'aaaa' * (2**62) }}"
hostile doubling "{% set ns = namespace(s='ab', l=[1]) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
hostile macro-tree '{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}'
hostile loops '{% for i in range(1000) %}{% for j in range(1000) %}{{ loop.index }}{% endfor %}{% endfor %}'
hostile cycle "{% set l = [] %}{% set _ = l.append(l) %}{% set d = {} %}{% set _ = d.update({'d': d}) %}"

# Sampler: temperature, top_k, top_p, min_p, repetition, presence, frequency (f32/i32),
# logprobs (i8), seed (u64), output index (i32), vocab-1 (u8), context, counts, logits.
mkdir -p $c/sampler_fuzzer
python3 - "$c/sampler_fuzzer" <<'PY'
import struct, sys, math
out = sys.argv[1]
def seed(name, t, k, p, minp, rep, pres, freq, lp, vocab, ctx, counts, logits):
    b = struct.pack("<fifffffb", t, k, p, minp, rep, pres, freq, lp)
    b += struct.pack('<QiB', 1234, 5, vocab - 1)
    b += struct.pack('<B', len(ctx)) + b''.join(struct.pack('<h', x) for x in ctx)
    b += struct.pack('<B', len(counts)) + b''.join(struct.pack('<hi', a, n) for a, n in counts)
    b += b''.join(struct.pack('<f', x) for x in logits)
    open(f'{out}/{name}', 'wb').write(b)
seed('greedy', 0.0, 0, 1.0, 0.0, 1.0, 0.0, 0.0, -1, 8, [], [], [1, 2, 3, 4, 3, 2, 1, 0])
seed('filters', 0.8, 3, 0.9, 0.1, 1.3, 0.5, 0.2, 2, 8, [1, 2, 9], [(3, 2), (-1, 1)],
     [0.5, 2, -1, 4, 4, 0, 1, 3])
seed('tiny-temp-minp', 1e-45, 0, 1.0, 0.5, 1.0, 0.0, 0.0, 5, 6, [], [], [1, 1, 2, 0, -3, 2])
seed('nan-inf', 1.0, 0, 0.5, 0.0, 1.0, 0.0, 0.0, 20, 6, [0], [],
     [math.nan, math.inf, -math.inf, 1.0, math.nan, 0.0])
seed('all-nan', 2.0, 2, 1.0, 0.0, 1.0, 0.0, 0.0, 1, 4, [], [], [math.nan] * 4)
PY

# Grammar shapes: bytes 0-1 pick the shape (mod 9: GBNF chain, nullable product, nested
# quantifiers, many alternatives; schema type list, identical $refs, pattern nesting, enum;
# tools), the next bytes its sizes, the rest is output to match.
mkdir -p $c/grammar_shape_fuzzer
shape() { printf "$2" > "$c/grammar_shape_fuzzer/$1"; }
shape chain-identical '\x00\x00\x00\x28\x00\x00sxx'
shape chain-distinct '\x00\x00\x00\x14\x00\x01s112'
shape nullable-product '\x00\x01\x00\x20x'
shape nested-quantifiers '\x00\x02\x00\x03\x00\x03\x00\x04\x00\x01\x00\x02aaaaaaab'
shape many-alternatives '\x00\x03\x0b\xb8k2999z'
shape type-list '\x00\x04\x00\x1e\x00\x00\x00\x00\x00\x05\x08\x00\x08\x00"abc"'
shape identical-refs '\x00\x05\x00\x28\x00\x02\x00\x01\x00\x01[[false]]'
shape pattern-nesting '\x00\x06\x00\x10\x00\x01\x00\x01\x00\x07"aaaa"'
shape enum '\x00\x07\x13\x88\x03\xe8\x00\x01{"c": "v-17"}'
shape tools '\x00\x08\x00\x08\x00\x00\x00\x1e<tool_call>\n{"name": "f1", "arguments": {"p": 1}}'
