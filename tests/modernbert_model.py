"""A tiny ModernBERT checkpoint in Hugging Face's layout (config.json, model.safetensors, a
byte-level BPE `tokenizer.json` trained with the `tokenizers` library on a fixed corpus, the
sentence-transformers mean-pooling config): what `llamars-convert` turns into a
`modern-bert` GGUF with a `gpt2` vocabulary and the `modern-bert` pre-tokenizer, as llama.cpp's
converter does for ModernBERT embedding models. Weights are drawn with numpy."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from xlmr_model import write_safetensors

N_EMBD, N_LAYER, N_HEAD, N_FF, N_POS = 64, 4, 4, 96, 256
# the local layers' full window (±4 tokens) and the period of the global layers
WINDOW, EVERY = 8, 3
SPECIAL = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]

WORDS = ("the a local server model vector search query answer river mountain history science water city "
         "quickly slowly because however question table window garden naïve café Zürich 東京 数据 ünïcödé "
         "don't it's we'll 1234 3.14 #tag @user e-mail foo_bar CamelCase").split()


def corpus(n: int = 400, seed: int = 5) -> list:
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(3, 30))) + r.choice([".", "!", "?", "", "\n"]) for _ in range(n)]


def tokenizer_json() -> str:
    """A byte-level BPE in ModernBERT's pipeline: no normalizer, ByteLevel pre-tokenization
    with GPT-2's regex and no prefix space, `[CLS] $A [SEP]`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    n = tok.get_vocab_size()
    tok.add_special_tokens(SPECIAL)
    cls, sep = n + 1, n + 2
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok.to_str()


def _pooling_config(d: Path) -> None:
    """sentence-transformers' mean pooling (modules.json, 1_Pooling/config.json)."""
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                                                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (d / "1_Pooling").mkdir(exist_ok=True)
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": N_EMBD, "pooling_mode_mean_tokens": True}))


def write_checkpoint(d: Path, seed: int = 0, classifier: str = "") -> Path:
    """The checkpoint directory `d`: ModernBertModel with mean pooling, or with
    `classifier` ("mean" / "cls": its classifier_pooling) a one-label
    ModernBertForSequenceClassification (a reranker)."""
    d.mkdir(parents=True, exist_ok=True)
    tj = tokenizer_json()
    (d / "tokenizer.json").write_text(tj, encoding="utf-8")
    vocab = json.loads(tj)["model"]["vocab"]
    nv = len(vocab) + len(SPECIAL)
    ids = {t: len(vocab) + i for i, t in enumerate(SPECIAL)}
    (d / "tokenizer_config.json").write_text(json.dumps({"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]", "unk_token": "[UNK]",
                                                         "model_max_length": N_POS, "tokenizer_class": "PreTrainedTokenizerFast"}))
    cfg = {
        "architectures": ["ModernBertModel"], "model_type": "modernbert", "vocab_size": nv, "hidden_size": N_EMBD,
        "intermediate_size": N_FF, "num_hidden_layers": N_LAYER, "num_attention_heads": N_HEAD, "hidden_activation": "gelu",
        "max_position_embeddings": N_POS, "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False, "mlp_bias": False,
        "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "local_attention": WINDOW, "global_attn_every_n_layers": EVERY,
        "pad_token_id": ids["[PAD]"], "bos_token_id": ids["[CLS]"], "eos_token_id": ids["[SEP]"], "cls_token_id": ids["[CLS]"],
        "sep_token_id": ids["[SEP]"], "embedding_dropout": 0.0, "attention_dropout": 0.0, "mlp_dropout": 0.0,
        "initializer_range": 0.02, "classifier_pooling": "mean", "tie_word_embeddings": True,
    }
    if classifier:
        cfg.update(architectures=["ModernBertForSequenceClassification"], classifier_pooling=classifier, classifier_activation="gelu",
                   classifier_bias=False, classifier_dropout=0.0, id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    (d / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    if not classifier:  # a cross-encoder has no sentence-transformers pooling
        _pooling_config(d)
    rng = np.random.default_rng(seed)
    e, F = N_EMBD, N_FF

    def norm():
        return 1.0 + 0.1 * rng.standard_normal(e)

    t = {"embeddings.tok_embeddings.weight": 0.5 * rng.standard_normal((nv, e)), "embeddings.norm.weight": norm()}
    for il in range(N_LAYER):
        p = f"layers.{il}."
        if il:
            t[p + "attn_norm.weight"] = norm()
        t[p + "attn.Wqkv.weight"] = 0.15 * rng.standard_normal((3 * e, e))
        t[p + "attn.Wo.weight"] = 0.1 * rng.standard_normal((e, e))
        t[p + "mlp_norm.weight"] = norm()
        t[p + "mlp.Wi.weight"] = 0.1 * rng.standard_normal((2 * F, e))
        t[p + "mlp.Wo.weight"] = 0.1 * rng.standard_normal((e, F))
    t["final_norm.weight"] = norm()
    if classifier:
        t = {"model." + k: v for k, v in t.items()}
        t.update({"head.dense.weight": 0.2 * rng.standard_normal((e, e)), "head.norm.weight": norm(),
                  "classifier.weight": 0.3 * rng.standard_normal((1, e)), "classifier.bias": 0.1 * rng.standard_normal(1)})
    write_safetensors(d / "model.safetensors", t)
    return d
