#!/usr/bin/env bash
# pagoda's greedy tokens and logprobs against the float64 Python reference
# (tools/reference_llama.py) on stories260K and on the tiny preset (GQA, tied embeddings
# absent/present), to 1e-4.
set -euo pipefail
bin="$1"
src="$2"
models="${PAGODA_MODELS_DIR:?PAGODA_MODELS_DIR must be set}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$src/tools/reference_llama.py" --model "$models/stories260K.gguf" --pagoda "$bin/pagoda" \
  --steps 12
"$bin/pagoda" make-model --preset tiny --out "$tmp/tiny.gguf" >/dev/null
python3 "$src/tools/reference_llama.py" --model "$tmp/tiny.gguf" --pagoda "$bin/pagoda" \
  --prompt "The quick brown fox" --steps 8
