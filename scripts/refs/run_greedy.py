#!/usr/bin/env python3
"""Greedy continuations from llama.cpp's llama-server (127.0.0.1 only).

  /usr/bin/python3 run_greedy.py --model M.gguf --cases CASES.json --n-predict N \
      --out OUT.json [--ctx 4096] [--port 18181] [--log SERVER.log] [--extra-args "..."] \
      [--server LLAMA_SERVER]

CASES.json: [{"prompt": text, "prompt_token_ids": [ids incl. BOS]}, ...]. The ids are
sent as the prompt (no tokenization by the server); a fresh server per case.
Each case also gets min_top1_top2_logit_margin (smallest logit gap between the chosen token
and the runner-up over the generated steps, from n_probs=2 raw-logit log-probs) and, with
--fa-check, same_with_flash_attn_off (the ids from a second run with `-fa off`, stored as
output_token_ids_flash_attn_off when they differ; the
references themselves use the server default `-fa auto`, which enabled flash attention). Request: temperature 0, top_k 1,
samplers ["top_k"], cache_prompt false, return_tokens true. Server: -np 1 -t 2 -tb 2
-ctk f32 -ctv f32 --no-warmup.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import time
import urllib.request

SERVER = '/tmp/llama.cpp/build/bin/llama-server'


def post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', data=json.dumps(body).encode(),
                                 headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def wait_health(port: int, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f'server exited with {proc.returncode}')
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=5) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit('server did not become healthy')


def run_case(cmd: list[str], args, c: dict, log) -> tuple[list[int], str, list[float], str]:
    """Starts a fresh server (no KV cache shared between cases), runs one greedy request."""
    log.write('# ' + ' '.join(cmd) + '\n')
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_health(args.port, proc)
        body = {'prompt': c['prompt_token_ids'], 'n_predict': args.n_predict,
                'temperature': 0, 'top_k': 1, 'samplers': ['top_k'], 'n_probs': 2,
                'cache_prompt': False, 'return_tokens': True, 'stream': False}
        r = post(args.port, '/completion', body)
        toks = r['tokens']
        det = post(args.port, '/detokenize', {'tokens': toks})
    finally:
        proc.terminate()
        proc.wait()
    margins = []
    for step, p in enumerate(r['completion_probabilities']):
        top = p['top_logprobs']
        assert top[0]['id'] == toks[step], (step, top[0], toks[step])
        margins.append(top[0]['logprob'] - top[1]['logprob'])
    return toks, det['content'], margins, r.get('stop_type', '?')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--cases', required=True)
    ap.add_argument('--n-predict', type=int, required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--ctx', type=int, default=4096)
    ap.add_argument('--port', type=int, default=18181)
    ap.add_argument('--server', default=SERVER, help='llama-server binary')
    ap.add_argument('--log', default=None)
    ap.add_argument('--extra-args', default='')
    ap.add_argument('--model-label', default=None)
    ap.add_argument('--fa-check', action='store_true', help='also run with -fa off and record agreement')
    ap.add_argument('--all-margins', action='store_true',
                    help='store every step\'s top-1/top-2 logit margin (top1_top2_logit_margins)')
    ap.add_argument('--decoding', default='greedy (temperature 0, top_k 1), BOS prepended, F32 weights as stored, f32 KV cache')
    args = ap.parse_args()

    cmd = [args.server, '-m', args.model, '--host', '127.0.0.1', '--port', str(args.port),
           '-np', '1', '-c', str(args.ctx), '-t', '2', '-tb', '2', '-ctk', 'f32', '-ctv', 'f32',
           '--no-warmup'] + shlex.split(args.extra_args)
    log = open(args.log or '/dev/null', 'w')
    cases = json.load(open(args.cases))
    out_cases = []
    for c in cases:
        toks, text, margins, stop = run_case(cmd, args, c, log)
        oc = {'prompt': c['prompt'], 'prompt_token_ids': c['prompt_token_ids'],
              'output_token_ids': toks, 'output_text': text}
        if len(toks) != args.n_predict:
            oc['stop'] = stop
        i = min(range(len(margins)), key=lambda k: margins[k])
        oc['min_top1_top2_logit_margin'] = {'step': i, 'margin': round(margins[i], 6)}
        if args.all_margins:
            oc['top1_top2_logit_margins'] = [round(m, 5) for m in margins]
        if args.fa_check:
            toks2, _, _, _ = run_case(cmd + ['-fa', 'off'], args, c, log)
            oc['same_with_flash_attn_off'] = toks2 == toks
            if toks2 != toks:
                oc['output_token_ids_flash_attn_off'] = toks2
        out_cases.append(oc)
        print(f"{len(c['prompt_token_ids'])} prompt tokens -> {len(toks)}: {text[:50]!r} "
              f"min margin {margins[i]:.5f} @ {i} fa_off_same={oc.get('same_with_flash_attn_off')}")
    log.close()
    sha = hashlib.sha256(open(args.model, 'rb').read()).hexdigest()
    label = args.model_label or args.model.rsplit('/', 1)[-1]
    doc = {'model': label, 'sha256': sha, 'decoding': args.decoding,
           'source': 'llama.cpp llama-server at commit de3ff815ea7d559ee917f063901b8986f038abc6, '
                     'prompt passed as token ids, f32 KV cache (-ctk f32 -ctv f32), -np 1 -t 2 -tb 2, '
                     'default -fa auto (flash attention was enabled on CPU), a fresh server per case',
           'cases': out_cases}
    write_json(args.out, doc)


def write_json(path: str, doc: dict) -> None:
    """Same layout as tests/data/stories260K.golden.json: one line per case field."""
    lines = ['{']
    head = [k for k in doc if k != 'cases']
    for k in head:
        lines.append(f' {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},')
    lines.append(' "cases": [')
    for i, c in enumerate(doc['cases']):
        items = [f'{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}' for k, v in c.items()]
        body = ',\n   '.join(items)
        lines.append('  {' + body + '}' + (',' if i + 1 < len(doc['cases']) else ''))
    lines.append(' ]')
    lines.append('}')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
