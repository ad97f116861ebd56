#!/usr/bin/env python3
"""Special-token tokenizer references from llama.cpp's llama-tokenize.

  /usr/bin/python3 make_vocab_special.py VOCAB_DIR OUT.json

For every ggml-vocab-*.gguf named below, runs
  llama-tokenize -m VOCAB -f TEXTFILE --no-escape --ids --no-bos [--no-parse-special] --log-disable
for each test string (bytes passed verbatim through a file), and parses the vocab load
log of one verbose run (`llama-tokenize -m VOCAB -p x --ids -v`) for BOS/EOS/EOT/EOG lines.
add_bos / add_eos are read from the ids of "Hi" tokenized WITH the special tokens
(no --no-bos): a leading BOS id means add_bos, a trailing EOS id means add_eos.
load_log keeps the relevant lines of the `-v` loading output.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

TOKENIZE = '/tmp/llama.cpp/build/bin/llama-tokenize'
VOCABS = ['ggml-vocab-llama-bpe.gguf', 'ggml-vocab-qwen2.gguf',
          'ggml-vocab-llama-spm.gguf', 'ggml-vocab-phi-3.gguf']

CASES = [
    # Llama 3 chat
    '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>'
    '<|start_header_id|>assistant<|end_header_id|>\n\n',
    # Qwen / ChatML chat
    '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n',
    # Llama 2 chat
    '[INST] Hi [/INST]',
    '<s>[INST] Hi [/INST] Hello!</s>',
    # Phi-3 chat
    '<|user|>\nHi<|end|>\n<|assistant|>',
    # special text glued to words
    'word<|im_end|>word</s>word<|eot_id|>word<|end|>word<|endoftext|>word',
    # repeated
    '<|im_end|><|im_end|></s></s><|eot_id|><|eot_id|><|end|><|end|>',
    # at the start / end, with spaces around
    ' <|im_start|> hi <|eot_id|> </s> ',
    # partial / malformed special text
    '<|im_star <|eot_id| </s <s <|end <|end_of_text|',
    # other specials
    '<|endoftext|><|end_of_text|><unk><pad>',
]


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=True)


def tokenize(vocab: str, text: str, parse_special: bool, no_bos: bool = True) -> list[int]:
    with tempfile.NamedTemporaryFile('wb', delete=False, suffix='.txt') as f:
        f.write(text.encode('utf-8'))
        path = f.name
    try:
        args = [TOKENIZE, '-m', vocab, '-f', path, '--no-escape', '--ids', '--log-disable']
        if no_bos:
            args.append('--no-bos')
        if not parse_special:
            args.append('--no-parse-special')
        out = run(args).stdout.strip().splitlines()[-1]
        return json.loads(out)
    finally:
        os.unlink(path)


def load_info(vocab: str) -> dict:
    log = run([TOKENIZE, '-m', vocab, '-p', 'x', '--ids', '-v'])
    text = log.stderr + log.stdout
    info: dict = {'eog_ids': [], 'load_log': []}
    for line in text.splitlines():
        if re.search(r'control-looking|print_info: (BOS|EOS|EOT|EOM|EOG|UNK|PAD) token', line):
            info['load_log'].append(re.sub(r'^[0-9.]+ [A-Z] ', '', line))
        m = re.search(r'print_info: (BOS|EOS|EOT|EOM|UNK|PAD|EOG) token\s+= (\d+) ', line)
        if not m:
            continue
        kind, tid = m.group(1).lower(), int(m.group(2))
        if kind == 'eog':
            info['eog_ids'].append(tid)
        else:
            info[kind] = tid
    return info


def main() -> None:
    vocab_dir, out_path = sys.argv[1], sys.argv[2]
    doc = {}
    for name in VOCABS:
        vocab = os.path.join(vocab_dir, name)
        info = load_info(vocab)
        with_special = tokenize(vocab, 'Hi', parse_special=True, no_bos=False)
        plain = tokenize(vocab, 'Hi', parse_special=True)
        entry = {'bos': info.get('bos'), 'eos': info.get('eos')}
        for k in ('eot', 'eom', 'unk', 'pad'):
            if k in info:
                entry[k] = info[k]
        entry['add_bos'] = len(with_special) > len(plain) and with_special[0] == info.get('bos')
        entry['add_eos'] = len(with_special) > len(plain) and with_special[-1] == info.get('eos')
        entry['tokenize_Hi_with_add_special'] = with_special
        entry['eog_ids'] = sorted(info['eog_ids'])
        entry['load_log'] = info['load_log']
        entry['cases'] = []
        for text in CASES:
            for ps in (True, False):
                entry['cases'].append({'text': text, 'parse_special': ps,
                                       'token_ids': tokenize(vocab, text, ps)})
        doc[name] = entry
        print(name, {k: v for k, v in entry.items() if k != 'cases'})
    with open(out_path, 'w') as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write('\n')


if __name__ == '__main__':
    main()
