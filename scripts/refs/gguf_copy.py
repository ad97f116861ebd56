#!/usr/bin/env python3
"""Copy a GGUF file with changed metadata and extra tensors (uses gguf-py).

Library used by make_variants.py. Run with
  PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 ...
"""
from __future__ import annotations

import numpy as np
import gguf


def read_fields(reader: gguf.GGUFReader) -> list[tuple[str, object, gguf.GGUFValueType, gguf.GGUFValueType | None]]:
    """Returns (key, value, type, array subtype) for every real key/value pair."""
    out = []
    for field in reader.fields.values():
        if field.name.startswith('GGUF.'):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        out.append((field.name, field.contents(), vtype, sub))
    return out


def copy_gguf(src: str, dst: str, arch: str | None = None,
              rename_prefix: tuple[str, str] | None = None,
              set_kv: dict[str, tuple[object, gguf.GGUFValueType]] | None = None,
              extra_tensors: list[tuple[str, np.ndarray]] | None = None) -> None:
    """Writes dst = src with general.architecture=arch, keys renamed by prefix,
    keys set/added from set_kv, and F32 extra tensors appended."""
    reader = gguf.GGUFReader(src)
    fields = read_fields(reader)
    src_arch = next(v for k, v, _, _ in fields if k == 'general.architecture')
    arch = arch or src_arch
    writer = gguf.GGUFWriter(dst, arch)
    set_kv = dict(set_kv or {})
    for key, value, vtype, sub in fields:
        if key == 'general.architecture':
            continue
        if rename_prefix and key.startswith(rename_prefix[0]):
            key = rename_prefix[1] + key[len(rename_prefix[0]):]
        if key in set_kv:
            value, vtype = set_kv.pop(key)
            sub = None
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for key, (value, vtype) in set_kv.items():
        writer.add_key_value(key, value, vtype)
    extra_tensors = extra_tensors or []
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    for name, arr in extra_tensors:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        writer.add_tensor_info(name, arr.shape, arr.dtype, arr.nbytes, gguf.GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    for _, arr in extra_tensors:
        writer.write_tensor_data(np.ascontiguousarray(arr, dtype=np.float32))
    writer.close()
