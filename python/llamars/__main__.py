"""`python -m llamars`: stream a completion from a model (the default model when none is given)."""
from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m llamars", description="Generate text with a GGUF model.")
    p.add_argument("-m", "--model", help="GGUF model path (default: the default chat model, SmolLM2-135M-Instruct)")
    p.add_argument("-p", "--prompt", default="The capital of France is", help="prompt text")
    p.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate (-1 = until end of context)")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size (0 = the model's)")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    p.add_argument("--temp", type=float, default=0.8, help="temperature (0 = greedy)")
    p.add_argument("-s", "--seed", type=int, default=None, help="random seed")
    a = p.parse_args(argv)

    from . import Engine, LlamarsError
    from .models import default_model

    try:
        path = a.model or str(default_model())
        t0 = time.perf_counter()
        eng = Engine(path, n_ctx=a.ctx_size, n_threads=a.threads)
        print(f"llamars: loaded {eng!r} in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
        s = eng.stream(a.prompt, max_tokens=None if a.n_predict < 0 else a.n_predict, temperature=a.temp, seed=a.seed)
        sys.stdout.write(a.prompt)
        for chunk in s:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
        sys.stdout.write("\n")
        r = s.result
        if r is not None:
            t = r.timings
            print(
                f"llamars: prompt {t.prompt_n} tokens {t.prompt_per_second:.1f} tok/s, "
                f"generated {t.predicted_n} tokens {t.predicted_per_second:.1f} tok/s, stop: {r.stop_reason}",
                file=sys.stderr,
            )
    except (LlamarsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
