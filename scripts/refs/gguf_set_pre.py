#!/usr/bin/env python3
"""Copies a vocabulary-only GGUF with tokenizer.ggml.pre set to another value.

  PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 scripts/gguf_set_pre.py SRC DST PRE
"""
import sys

import gguf


def main() -> None:
    src, dst, pre = sys.argv[1:4]
    reader = gguf.GGUFReader(src)
    arch = reader.fields['general.architecture'].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        name = field.name
        if name.startswith('GGUF.') or name == 'general.architecture':
            continue
        vtype = field.types[0]
        value = pre if name == 'tokenizer.ggml.pre' else field.contents()
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, vtype, sub_type=sub)
    assert not reader.tensors, 'vocab-only files only'
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == '__main__':
    main()
