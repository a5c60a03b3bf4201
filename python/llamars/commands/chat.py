"""`llamars run [MODEL] [PROMPT]`: chat with a model in the terminal through its chat
template, the reply streamed as it is generated. With a PROMPT: one reply, then exit.
Without: a conversation, one user turn per line (`/clear` forgets it, `/bye` or Ctrl-D
ends it, Ctrl-C stops the reply being written). Lines read from a pipe are turns too."""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, TextIO

from ..progress import interactive


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llamars run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("words", nargs="*", metavar="[MODEL] [PROMPT]",
                   help="a GGUF file (the first word, when it names a file or ends in .gguf), then the prompt")
    p.add_argument("-m", "--model", help="GGUF model (default: the default chat model, SmolLM2-135M-Instruct)")
    p.add_argument("-sys", "--system", help="system message")
    p.add_argument("-n", "--n-predict", type=int, default=-1, help="most tokens per reply (-1: until the reply ends)")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size (0: the model's)")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    p.add_argument("-ngl", "--n-gpu-layers", default="auto", help="layers on the GPU: a count, auto or all (default auto)")
    p.add_argument("--temp", type=float, default=0.8, help="temperature (0: greedy)")
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--min-p", type=float, default=0.05)
    p.add_argument("-s", "--seed", type=int, default=None, help="random seed")
    p.add_argument("--verbose", action="store_true", help="timings after each reply")
    return p


def split_words(words: List[str], model: Optional[str]):
    """(model, prompt): the first word is the model when it names a file or a .gguf."""
    if model is None and words and (words[0].lower().endswith(".gguf") or os.path.isfile(words[0])):
        model, words = words[0], words[1:]
    return model, (" ".join(words) if words else None)


class Chat:
    """A conversation with one engine; `reply` streams one assistant turn to `out`."""

    def __init__(self, engine, system: Optional[str], gen: dict, out: TextIO) -> None:
        self.engine, self.system, self.gen, self.out = engine, system, gen, out
        self.messages: List[dict] = []
        self.clear()

    def clear(self) -> None:
        self.messages = [{"role": "system", "content": self.system}] if self.system else []

    def reply(self, text: str):
        from ..chat.plan import plan_chat

        msgs = self.messages + [{"role": "user", "content": text}]
        plan = plan_chat(self.engine.chat_template, msgs)
        bos = self.engine.chat_template.bos_token
        ids = self.engine.tokenize(plan.prompt, add_special=not (bos and plan.prompt.startswith(bos)), parse_special=True)
        parse = plan.parser()
        stream = self.engine.stream(ids, **self.gen)
        thinking = False
        try:
            for chunk in stream:
                d = parse.feed(chunk.text)
                if d.reasoning:
                    if not thinking:
                        self.out.write("[thinking] ")
                        thinking = True
                    self.out.write(d.reasoning)
                if d.content:
                    if thinking:
                        self.out.write("\n[/thinking]\n")
                        thinking = False
                    self.out.write(d.content)
                self.out.flush()
        except KeyboardInterrupt:
            stream.close()
            self.out.write(" [stopped]")
        reply, last = parse.finish()
        self.out.write(last.content + "\n")
        self.out.flush()
        self.messages = msgs + [{"role": "assistant", "content": reply.content}]
        return stream.result


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    model, prompt = split_words(a.words, a.model)
    from .. import Engine, LlamarsError
    from ..models import default_model

    try:
        path = model or str(default_model())
        eng = Engine(path, n_ctx=a.ctx_size, n_threads=a.threads, n_gpu_layers=a.n_gpu_layers, progress=None)
    except (LlamarsError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    gen = dict(max_tokens=None if a.n_predict < 0 else a.n_predict, temperature=a.temp, top_k=a.top_k, top_p=a.top_p,
               min_p=a.min_p, seed=a.seed)
    chat = Chat(eng, a.system, gen, sys.stdout)
    tty = interactive(sys.stdin) and interactive(sys.stdout)
    try:
        if prompt is not None:
            return _turn(chat, prompt, a.verbose)
        if tty:
            print(f"llamars: chatting with {os.path.basename(path)}; /clear forgets, /bye or Ctrl-D ends", file=sys.stderr)
        while True:
            try:
                line = input(">>> " if tty else "")
            except EOFError:
                return 0
            except KeyboardInterrupt:
                print(file=sys.stderr)
                return 130
            text = line.strip()
            if not text:
                continue
            if text in ("/bye", "/exit", "/quit"):
                return 0
            if text == "/clear":
                chat.clear()
                continue
            rc = _turn(chat, text, a.verbose)
            if rc:
                return rc
    finally:
        eng.close()


def _turn(chat: Chat, text: str, verbose: bool) -> int:
    from .. import LlamarsError

    try:
        r = chat.reply(text)
    except (LlamarsError, ValueError) as e:  # an over-long conversation, a template error
        print(f"error: {e}", file=sys.stderr)
        return 1
    if verbose and r is not None:
        t = r.timings
        print(f"llamars: prompt {t.prompt_n} tokens at {t.prompt_per_second:.1f} tok/s, reply {t.predicted_n} tokens at "
              f"{t.predicted_per_second:.1f} tok/s, stop: {r.stop_reason}", file=sys.stderr)
    return 0
