"""Writes a GGUF file with N blocks from one with fewer, block j a copy of
block j % n of the source (metadata copied, `<arch>.block_count` set to N).

For speed measurements at a real model's layer count when writing that many
distinct random layers (`baton model synth --layers N`) takes too long here:
a decode step reads every block from memory whether or not two hold the same
bytes, and routing still differs per block (it depends on the hidden state).
Not for accuracy checks. Needs PyPI `gguf` and `numpy` (target/ref-venv).

Usage: python scripts/repeat_layers.py SRC.gguf N DST.gguf
"""

import re
import sys

import gguf


def main() -> None:
    src, layers, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    have = reader.fields[f"{arch}.block_count"].contents()
    if layers < 1:
        sys.exit("N must be at least 1")
    writer = gguf.GGUFWriter(dst, arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = layers if field.name == f"{arch}.block_count" else field.contents()
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, vtype, sub)
    block = re.compile(r"^blk\.(\d+)\.(.*)$")
    blocks = {}
    others = []
    for tensor in reader.tensors:
        m = block.match(tensor.name)
        if m:
            blocks.setdefault(int(m.group(1)), []).append((m.group(2), tensor))
        else:
            others.append(tensor)

    def add(name, tensor):
        # The reader's data is shaped as the writer wants it: values for
        # float types, bytes per row for quantized ones.
        writer.add_tensor(name, tensor.data, raw_dtype=tensor.tensor_type)

    for tensor in others:
        if tensor.name != "output.weight":
            add(tensor.name, tensor)
    for j in range(layers):
        for suffix, tensor in blocks[j % have]:
            add(f"blk.{j}.{suffix}", tensor)
    for tensor in others:
        if tensor.name == "output.weight":
            add(tensor.name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


if __name__ == "__main__":
    main()
