#!/usr/bin/env python3
"""Pre-tokenizer references: llama.cpp's ids for the Llama 3 vocabulary with
tokenizer.ggml.pre set to each pre-tokenizer pagoda implements.

  /usr/bin/python3 scripts/make_pretokenizer_refs.py VOCAB_DIR VARIANT_DIR OUT.json

VARIANT_DIR holds llama-bpe-pre-<PRE>.gguf (ggml-vocab-llama-bpe.gguf with only
tokenizer.ggml.pre changed, made by scripts/gguf_set_pre.py). Strings: the llama-bpe .inp strings
plus EXTRA. Each is tokenized with
  llama-tokenize -m VARIANT -f TEXTFILE --no-escape --ids --no-bos --no-parse-special --log-disable
"""
import json
import os
import subprocess
import sys
import tempfile

TOKENIZE = '/tmp/llama.cpp/build/bin/llama-tokenize'
PRES = ['default', 'gpt-2', 'llama-bpe', 'qwen2', 'smollm', 'deepseek-llm', 'tekken']
EXTRA = [
    "Hello, World! It's 3.14159 and 1,234,567 items.",
    "I'M SURE YOU'LL SEE THEY'RE HERE; HE'D've it's",
    "CamelCaseWord XMLHttpRequest iPhone eBay \u00c9COLE \u00c6r\u00f8 stra\u00dfe \u01c5emal",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u041a\u0438\u0440\u0438\u043b\u043b\u0438\u0446\u0430 \u0551\u0561\u0575 \u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8",
    "\u4e2d\u6587\uff0c\u6d4b\u8bd5\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3002\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8!",
    "caf\u00e9 na\u00efve e\u0301 a\u0308 \u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0e44\u0e17\u0e22",
    "tabs\tand\r\nCRLF\r\n\r\n  indented\n\tcode();\n",
    "x = a/b // comment\n/* c */ path/to/file.txt",
    "\u0661\u0662\u0663 \u00b2\u00b3 \u00bd \u216b \uff10\uff11\uff12 \u2460\u2461",
    "emoji \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1fa\U0001f1f8 \u2705",
    "\u00a0nbsp\u2003em\u3000ideo\u200bzw\u0085nl",
    "$100 + 50% = <tag> ^ ~ | ` @#",
    "   leading and trailing   ",
    "\u00b5s \u2103 \u2109 \u2126 \u212a \u00c5 \ufb01 \uff21\uff22\uff23 \uff41\uff42\uff43",
    "a'b's'S'T'Re'VE'll'D 'x",
    "ABC123def456GHI 7 88 999 1000 12345678901",
    "\n\n\n",
    "   ",
    "\t\t",
    "a  b   c    d\n  \n\t x",
    "\uff01\uff1f\u3001\u3002\u201c\u201d\u2018\u2019 \u2014 \u2026",
    "MixedUPPERlowerUPPER \u00e9\u00c9\u00e9\u00c9 \u00c9t\u00e9",
    "foo_bar-baz.qux@example.com https://x.org/a?b=c&d=e#f",
    "\u0410\u0411\u0412\u0433\u0434\u0435 \u03a9\u03c9\u03a3\u03c3",
    "/\n//\r\n/// ///x",
]


def tokenize(model: str, text: str) -> list[int]:
    with tempfile.NamedTemporaryFile('wb', delete=False, suffix='.txt') as f:
        f.write(text.encode('utf-8'))
        path = f.name
    try:
        out = subprocess.run([TOKENIZE, '-m', model, '-f', path, '--no-escape', '--ids',
                              '--no-bos', '--no-parse-special', '--log-disable'],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(path)
    line = out.strip().splitlines()[-1]
    return json.loads(line)


def main() -> None:
    vocab_dir, variant_dir, out_path = sys.argv[1:4]
    raw = open(os.path.join(vocab_dir, 'ggml-vocab-llama-bpe.gguf.inp'), 'rb').read().decode('utf-8')
    strings = raw.split('\n__ggml_vocab_test__\n')
    if strings and strings[-1] == '':
        strings.pop()
    strings += EXTRA
    result = {'vocab': 'ggml-vocab-llama-bpe.gguf', 'strings': strings, 'ids': {}}
    for pre in PRES:
        model = os.path.join(variant_dir, f'llama-bpe-pre-{pre}.gguf')
        result['ids'][pre] = [tokenize(model, s) for s in strings]
    with open(out_path, 'w', encoding='utf-8') as f:
        json.dump(result, f, ensure_ascii=False, separators=(',', ':'))
        f.write('\n')


if __name__ == '__main__':
    main()
