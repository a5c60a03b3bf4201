"""The shape of one `llamars-server` flag (`Opt`) and what the flag tables share; the
tables are cli_options.py (common and sampling flags) and cli_server_options.py
(llama-server's example-specific section)."""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple


class Opt(NamedTuple):
    names: str  # the flag spellings, comma-separated, as llama-server lists them
    dest: str  # ServerConfig field, "sampling.<field>", or "@<action>"
    kind: str  # int float str bool choice list json keys keyfile textfile ngl threads action mibs …
    hint: str  # value placeholder in --help ("" for flags without a value)
    help: str  # description; "\n" starts a new line, as in llama-server's --help
    env: Optional[str] = None
    section: str = "common"  # common | sampling | example-specific
    neg: str = ""  # spellings that turn a boolean off
    lo: Optional[float] = None
    hi: Optional[float] = None
    choices: Tuple[str, ...] = ()
    # llama-server flags llamars accepts without acting on them: why (printed as a one-line
    # warning at start). A flag with a value still has it checked by `kind`.
    inert: str = ""
    # flags of a feature llamars has not built yet: the feature, named in the refusal
    owner: str = ""
    # flags llama-server itself refuses (removed): its message
    removed: str = ""
    # an inert boolean whose "off" spelling asks for what llamars does anyway: no warning for it
    off_ok: bool = False


C, S, X = "common", "sampling", "example-specific"
KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")  # -ctk / -ctv
SPEC_TYPES = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple",
              "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
_E = "LLAMA_ARG_"


def split_names(names: str) -> List[str]:
    """"-c, --ctx-size" -> ["-c", "--ctx-size"]."""
    return [n.strip() for n in names.split(",") if n.strip()]

