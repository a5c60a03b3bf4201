"""Independent numpy implementation of the supported architectures (tests only).

Runs on dequantized f32 weights with exact math (no quantized activations, no f16
rounding), so it checks the Rust forward pass without sharing any of its code.
"""
from __future__ import annotations

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class Oracle:
    def __init__(self, path: str):
        r = GGUFReader(path)
        self.meta = {}
        for k, f in r.fields.items():
            if k.startswith("tokenizer.ggml.") and k != "tokenizer.ggml.model":
                continue
            try:
                self.meta[k] = f.contents()
            except Exception:
                pass
        self.t = {}
        for t in r.tensors:
            w = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
            shape = [int(d) for d in reversed(t.shape)]  # numpy order: [rows, cols]
            self.t[t.name] = w.reshape(shape) if len(shape) > 1 else w.reshape(-1)
        a = self.arch = self.meta["general.architecture"]
        if a not in ("llama", "qwen2", "qwen3", "gemma3", "phi3"):
            raise NotImplementedError(f"oracle: architecture {a!r} is not modelled")
        g = lambda k, d=None: self.meta.get(f"{a}.{k}", d)
        self.n_embd = g("embedding_length")
        self.n_layer = g("block_count")
        self.n_head = g("attention.head_count")
        self.n_head_kv = g("attention.head_count_kv", self.n_head)
        self.head_dim = g("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = g("rope.dimension_count", self.head_dim)
        self.eps = g("attention.layer_norm_rms_epsilon", 1e-5)
        self.rope_base = g("rope.freq_base", 10000.0)
        self.window = g("attention.sliding_window", 0) or 0
        self.neox = a != "llama"
        gemma = a == "gemma3"
        # Gemma 3 (llama.cpp): every 6th layer global, the others local with RoPE base 10000;
        # embeddings scaled by sqrt(n_embd); GELU (tanh) instead of SiLU.
        self.swa_layers = [gemma and self.window > 0 and il % 6 < 5 for il in range(self.n_layer)]
        self.rope_base_swa = 10000.0
        self.embd_scale = float(np.sqrt(self.n_embd)) if gemma else 1.0
        self.act = "gelu" if gemma else "silu"
        for k in (f"{a}.rope.scaling.type", f"{a}.rope.scaling.factor", f"{a}.rope.scale_linear"):
            if k in self.meta and self.meta[k] not in ("none", 1.0):
                raise NotImplementedError(f"oracle: {k} = {self.meta[k]!r} is not modelled")
        if "rope_freqs.weight" in self.t:
            raise NotImplementedError("oracle: rope_freqs.weight is not modelled")

    def kv_head(self, h: int) -> int:
        """The KV head query head `h` reads (GQA: consecutive query heads share one)."""
        return h // (self.n_head // self.n_head_kv)

    def _w(self, name):
        return self.t[name]

    def _norm(self, x, w):
        return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + self.eps).astype(np.float32) * w

    def _rope(self, x, pos, base):
        # x: [T, H, D]
        half = self.n_rot // 2
        inv = base ** (-np.arange(half, dtype=np.float64) * 2.0 / self.n_rot)
        ang = np.outer(pos, inv)  # [T, half]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x = x.astype(np.float64).copy()
        if self.neox:
            a, b = x[..., :half].copy(), x[..., half : 2 * half].copy()
            x[..., :half] = a * cos - b * sin
            x[..., half : 2 * half] = a * sin + b * cos
        else:
            a, b = x[..., 0 : 2 * half : 2].copy(), x[..., 1 : 2 * half : 2].copy()
            x[..., 0 : 2 * half : 2] = a * cos - b * sin
            x[..., 1 : 2 * half : 2] = a * sin + b * cos
        return x.astype(np.float32)

    def logits(self, tokens):
        T = len(tokens)
        pos = np.arange(T)
        x = self._w("token_embd.weight")[tokens].astype(np.float32) * np.float32(self.embd_scale)
        H, Hk, D = self.n_head, self.n_head_kv, self.head_dim
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = self._norm(x, self._w(p + "attn_norm.weight"))
            if p + "attn_qkv.weight" in self.t:
                qkv = h @ self._w(p + "attn_qkv.weight").T
                q, k, v = np.split(qkv, [H * D, H * D + Hk * D], axis=-1)
            else:
                q = h @ self._w(p + "attn_q.weight").T
                k = h @ self._w(p + "attn_k.weight").T
                v = h @ self._w(p + "attn_v.weight").T
            for nm, arr in (("attn_q", "q"), ("attn_k", "k"), ("attn_v", "v")):
                b = self.t.get(p + nm + ".bias")
                if b is not None:
                    if arr == "q":
                        q = q + b
                    elif arr == "k":
                        k = k + b
                    else:
                        v = v + b
            q = q.reshape(T, H, D)
            k = k.reshape(T, Hk, D)
            v = v.reshape(T, Hk, -1)
            if p + "attn_q_norm.weight" in self.t:  # per-head QK-norm (Qwen 3, Gemma 3)
                q = self._norm(q, self._w(p + "attn_q_norm.weight"))
            if p + "attn_k_norm.weight" in self.t:
                k = self._norm(k, self._w(p + "attn_k_norm.weight"))
            swa = self.swa_layers[il]
            base = self.rope_base_swa if swa else self.rope_base
            q, k = self._rope(q, pos, base), self._rope(k, pos, base)
            scale = 1.0 / np.sqrt(D)
            out = np.zeros((T, H, v.shape[-1]), dtype=np.float64)
            mask = np.tril(np.ones((T, T), dtype=bool))
            if swa:
                mask &= (pos[:, None] - pos[None, :]) < self.window
            for hh in range(H):
                g = self.kv_head(hh)
                s = (q[:, hh, :].astype(np.float64) @ k[:, g, :].T.astype(np.float64)) * scale
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                out[:, hh, :] = s @ v[:, g, :]
            o = out.reshape(T, -1).astype(np.float32) @ self._w(p + "attn_output.weight").T
            if p + "post_attention_norm.weight" in self.t:
                o = self._norm(o, self._w(p + "post_attention_norm.weight"))
            x = x + o
            h = self._norm(x, self._w(p + "ffn_norm.weight"))
            if p + "ffn_gate.weight" in self.t:
                gt = h @ self._w(p + "ffn_gate.weight").T
                up = h @ self._w(p + "ffn_up.weight").T
            else:
                gu = h @ self._w(p + "ffn_up.weight").T
                gt, up = np.split(gu, 2, axis=-1)
            if self.act == "gelu":
                act = 0.5 * gt * (1 + np.tanh(np.sqrt(2 / np.pi) * (gt + 0.044715 * gt**3)))
            else:
                act = gt / (1 + np.exp(-gt))
            d = (act * up) @ self._w(p + "ffn_down.weight").T
            if p + "post_ffw_norm.weight" in self.t:
                d = self._norm(d, self._w(p + "post_ffw_norm.weight"))
            x = x + d
        x = self._norm(x, self._w("output_norm.weight"))
        out_w = self.t.get("output.weight", self.t["token_embd.weight"])
        return (x @ out_w.T).astype(np.float32)
