"""Write tests/fixtures/ugm/ (tokenizer.json.gz, tokenizer_config.json): a small Unigram tokenizer laid out as
XLM-RoBERTa's (and bge-m3's) `tokenizer.json` is — SentencePiece's `nmt_nfkc` charsmap as
a `Precompiled` normalizer, runs of spaces collapsed, `Metaspace` (prepend always,
split), `<s> $A </s>` — trained with `sentencepiece` on a synthetic multilingual corpus.

    pip install sentencepiece tokenizers && python scripts/parity/ugm_tokenizer.py

The fixture is committed; tests only read it (and need `tokenizers`, not sentencepiece).
"""
import gzip
import json
import random
import tempfile
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb
from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram

OUT = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "ugm"

SYLLABLES = (
    "ka ki ku ke ko sa shi su se so ta chi tsu te to na ni nu ne no ha hi fu he ho ma mi mu me mo ya yu yo "
    "ra ri ru re ro wa n th qu br ow fo ju ov la do ca fé na ïv ré su mé Str aß e 東 京 日 本 語 한 국 어 "
    "ﬁ Ⅻ ① ｆ ｕ ½ üb dé jà Мо ск ва пр ив ет مر حب ا שָׁ לוֹ ם न म स्ते ελ λη νι κά"
).split()
WORDS = "the of and to in is that for it with as on was by this be are from at or an have not which".split()


def corpus(n: int, rng: random.Random) -> str:
    def word() -> str:
        if rng.random() < 0.3:
            return rng.choice(WORDS)
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))

    ends = ["", ".", "!", "?", ",", " 123", " 4.5", " (x)", " «quoted»"]
    return "\n".join(" ".join(word() for _ in range(rng.randint(3, 12))) + rng.choice(ends) for _ in range(n))


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "corpus.txt"
        src.write_text(corpus(20000, random.Random(0)), encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(src), model_prefix=str(Path(d) / "sp"), vocab_size=1000, model_type="unigram",
            normalization_rule_name="nmt_nfkc", character_coverage=0.999, hard_vocab_limit=False,
            num_threads=1, minloglevel=2,
        )
        proto = pb.ModelProto()
        proto.ParseFromString((Path(d) / "sp.model").read_bytes())
    # XLM-R's fairseq layout: <s> <pad> </s> <unk>, the pieces after SentencePiece's
    # own three, <mask> last
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in proto.pieces[3:]] + [("<mask>", 0.0)]
    tok = Tokenizer(Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<s>", "<pad>", "</s>", "<unk>")]
                           + [AddedToken("<mask>", special=True, lstrip=True)])
    OUT.mkdir(parents=True, exist_ok=True)
    raw = tok.to_str(pretty=True).encode("utf-8")
    (OUT / "tokenizer.json.gz").write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    cfg = {"tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
           "sep_token": "</s>", "cls_token": "<s>", "pad_token": "<pad>", "mask_token": "<mask>", "model_max_length": 512}
    (OUT / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    print(f"wrote {OUT} ({len(vocab)} pieces)")


if __name__ == "__main__":
    main()
