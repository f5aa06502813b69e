#!/usr/bin/env python3
"""Summarise a GGUF file with the independent `gguf` package, as JSON.

Usage: gguf_check.py FILE.gguf [--dequantize-to DIR]

Prints one JSON object:
  {"version": 3,
   "alignment": 32,
   "metadata": [{"key": ..., "type": "UINT32", "element_type": null, "value": ...}, ...],
   "tensors": [{"name": ..., "shape": [ggml order, dim 0 first], "type": "F32",
                "type_id": 0, "n_bytes": ..., "data_offset": ..., "checksum": float or null}, ...]}

Metadata values are given for scalars, strings and flat arrays (null for
nested arrays). `checksum` is the float64 sum of all elements of F32 and F16
tensors (null for other types). Used by baton-gguf's `reference-tests`.

With `--dequantize-to DIR`, every tensor is also decoded to float32 with
`gguf.quants.dequantize` (which knows every block format, K-quants
included) and written to `DIR/<tensor name>.f32` as raw little-endian
float32 in file order, for bit-exact comparison with Baton's decoders.
"""

import argparse
import json
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGMLQuantizationType
from gguf.quants import dequantize


def field_summary(field):
    main = field.types[0]
    # Direct element type of an array (ARRAY again for nested arrays).
    element = field.types[1] if main == GGUFValueType.ARRAY and len(field.types) > 1 else None
    if main == GGUFValueType.ARRAY and len(field.types) > 2:
        value = None  # nested array
    else:
        value = field.contents()
        if isinstance(value, list):
            value = [v.item() if hasattr(v, "item") else v for v in value]
        elif hasattr(value, "item"):
            value = value.item()
    return {
        "key": field.name,
        "type": main.name,
        "element_type": element.name if element is not None else None,
        "value": value,
    }


def tensor_summary(tensor):
    checksum = None
    if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        checksum = float(np.asarray(tensor.data, dtype=np.float64).sum())
    return {
        "name": tensor.name,
        "shape": [int(d) for d in tensor.shape],
        "type": tensor.tensor_type.name,
        "type_id": int(tensor.tensor_type),
        "n_bytes": int(tensor.n_bytes),
        "data_offset": int(tensor.data_offset),
        "checksum": checksum,
    }


def dump_dequantized(reader, directory):
    os.makedirs(directory, exist_ok=True)
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type)
        np.ascontiguousarray(values, dtype="<f4").tofile(os.path.join(directory, tensor.name + ".f32"))


def main():
    parser = argparse.ArgumentParser(description="Summarise a GGUF file as JSON.")
    parser.add_argument("file")
    parser.add_argument("--dequantize-to", metavar="DIR")
    args = parser.parse_args()
    reader = GGUFReader(args.file)
    if args.dequantize_to:
        dump_dequantized(reader, args.dequantize_to)
    fields = [f for f in reader.fields.values() if not f.name.startswith("GGUF.")]
    version_field = reader.fields["GGUF.version"]
    summary = {
        "version": int(version_field.parts[version_field.data[0]][0]),
        "alignment": int(reader.alignment),
        "metadata": [field_summary(f) for f in fields],
        "tensors": [tensor_summary(t) for t in reader.tensors],
    }
    json.dump(summary, sys.stdout, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
