"""The peer of `rlcpp bench tokenize`: Hugging Face `tokenizers` (the Rust library) encoding the same lines on one
thread, as rlcpp does. Run with the .venv python (scripts/ensure_python.sh).

  tokenizers_peer.py TOKENIZER_JSON TEXT_FILE ITERS   prints {"mb_per_s", "tokens", "bytes", "library"} of
      encoding line by line, and "whole_mb_per_s", "whole_tokens" of encoding the whole text in one call
"""
import json
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before the library loads: encode itself is single-threaded anyway
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    path, text_file, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tok = Tokenizer.from_file(path)
    with open(text_file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    nbytes = sum(len(line.encode("utf-8")) for line in lines)
    tokens = sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines)  # warm-up, as rlcpp's
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        for line in lines:
            tok.encode(line, add_special_tokens=False)
        times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    # The whole text in one call: no Python per call.
    whole = "\n".join(lines)
    whole_tokens = len(tok.encode(whole, add_special_tokens=False).ids)
    whole_times = []
    for _ in range(iters):
        start = time.perf_counter()
        tok.encode(whole, add_special_tokens=False)
        whole_times.append(time.perf_counter() - start)
    whole_times.sort()
    whole_median = whole_times[len(whole_times) // 2]
    print(json.dumps({"mb_per_s": nbytes / median / 1e6, "seconds": median, "tokens": tokens, "bytes": nbytes,
                      "whole_mb_per_s": len(whole.encode("utf-8")) / whole_median / 1e6,
                      "whole_tokens": whole_tokens, "library": "tokenizers " + tokenizers.__version__}))


if __name__ == "__main__":
    main()
