#!/usr/bin/env bash
# pagoda's greedy tokens and logprobs against the float64 Python reference
# (tools/reference_llama.py) on stories260K and on the tiny preset (GQA, tied embeddings
# absent/present) and the stories260K RoPE / qwen2 variants, to 1e-4.
set -euo pipefail
bin="$1"
src="$2"
models="${PAGODA_TESTDATA_DIR:?PAGODA_TESTDATA_DIR must be set}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$src/tools/reference_llama.py" --model "$models/stories260K.gguf" --pagoda "$bin/pagoda" \
  --steps 12
"$bin/pagoda" make-model --preset tiny --out "$tmp/tiny.gguf" >/dev/null
python3 "$src/tools/reference_llama.py" --model "$tmp/tiny.gguf" --pagoda "$bin/pagoda" \
  --prompt "The quick brown fox" --steps 8
# The RoPE / architecture variants (qwen2 NEOX + biases, rope_freqs, linear, YaRN); the
# longer prompt takes YaRN and rope_freqs past their 128-token original context.
for v in rope-freqs qwen2 linear yarn; do
  python3 "$src/tools/reference_llama.py" --model "$models/stories260K-$v.gguf" \
    --pagoda "$bin/pagoda" --steps 12
done
long="Once upon a time, there was a little girl named Lily. She lived in a small house near a"
long="$long big green park with her mom, her dad and her dog Max. Every morning, Lily liked to"
long="$long run outside and play in the sun. One day, she found a shiny red ball under a tree."
long="$long She wanted to show it to her friend Tom, so she ran to his house. Tom was very happy"
long="$long to see the ball. They played with it all day and laughed a lot. When the sun went"
long="$long down, they sat on the grass and talked about the stars in the sky."
for v in rope-freqs yarn; do
  python3 "$src/tools/reference_llama.py" --model "$models/stories260K-$v.gguf" \
    --pagoda "$bin/pagoda" --steps 6 --prompt "$long"
done
