"""Write the IQ quantization grids (ggml-common.h's iq2xxs_grid, iq2xs_grid, iq2s_grid,
iq3xxs_grid, iq3s_grid, iq1s_grid) as rust/quant/grids/<name>.bin: one byte per element
(entry after entry; signed bytes for iq1s), decoded from the `gguf` package's copies.

    python scripts/gen_iq_grids.py [--check]

`--check` compares the files with the gguf package instead of writing them
(tests/test_quant.py runs the same comparison).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from gguf import quants

OUT = Path(__file__).resolve().parent.parent / "rust" / "quant" / "grids"
GRIDS = {"iq2xxs": quants.IQ2_XXS, "iq2xs": quants.IQ2_XS, "iq2s": quants.IQ2_S, "iq3xxs": quants.IQ3_XXS, "iq3s": quants.IQ3_S, "iq1s": quants.IQ1_S}


def grid_bytes(cls) -> bytes:
    cls.init_grid()
    g = np.asarray(cls.grid, dtype=np.float32).reshape(-1)
    assert np.array_equal(g, np.round(g)) and g.min() >= -128 and g.max() <= 127
    return g.astype(np.int8).tobytes()


def main() -> int:
    check = "--check" in sys.argv[1:]
    bad = 0
    for name, cls in GRIDS.items():
        path = OUT / f"{name}.bin"
        data = grid_bytes(cls)
        if check:
            if not path.exists() or path.read_bytes() != data:
                print(f"{path}: differs from gguf's {cls.__name__} grid", file=sys.stderr)
                bad += 1
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"wrote {path} ({len(data)} bytes)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
