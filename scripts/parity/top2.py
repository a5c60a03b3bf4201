"""Teacher-forced top-two log-probabilities of llama.cpp (llama-cpp-python), the rows the
LoRA and KV-type references store (lora_reference.py, kv_reference.py)."""
from __future__ import annotations

import math

import numpy as np


def top2_rows(llm, prompts: list) -> list:
    """Per prompt ({"tokens": [...]}), each position's [top id, its log-prob, the second's
    log-prob] after evaluating the whole prompt in a fresh context."""
    rows = []
    for p in prompts:
        llm.reset()
        llm.eval(p["tokens"])
        pos = []
        for i in range(len(p["tokens"])):
            x = np.array(llm.scores[i], dtype=np.float64)
            m = x.max()
            lp = x - m - math.log(np.exp(x - m).sum())
            top = np.argsort(-lp)[:2]
            pos.append([int(top[0]), round(float(lp[top[0]]), 6), round(float(lp[top[1]]), 6)])
        rows.append(pos)
    return rows
