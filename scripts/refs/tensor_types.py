#!/usr/bin/env python3
"""Print a GGUF's tensor types compactly: 'type: tensor names (blk.N collapsed)'.

  PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 tensor_types.py FILE.gguf...
"""
import re
import sys
from collections import defaultdict

import gguf

for path in sys.argv[1:]:
    reader = gguf.GGUFReader(path)
    groups = defaultdict(list)
    for t in reader.tensors:
        groups[t.tensor_type.name].append(t.name)
    print(path.rsplit('/', 1)[-1] + ':')
    for typ, names in sorted(groups.items()):
        by_pat = defaultdict(list)
        for n in names:
            m = re.match(r'blk\.(\d+)\.(.*)', n)
            if m:
                by_pat['blk.*.' + m.group(2)].append(int(m.group(1)))
            else:
                by_pat[n].append(-1)
        parts = []
        for pat, ids in by_pat.items():
            if pat.startswith('blk.*.'):
                parts.append(pat.replace('*', '{' + ','.join(map(str, sorted(ids))) + '}'))
            else:
                parts.append(pat)
        print(f'  {typ}: ' + ' '.join(parts))
