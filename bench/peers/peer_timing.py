"""The timing loop the rollout peers share (vllm_rollout.py, hf_generate.py): `warmup` untimed calls of `once`,
then `iters` timed ones; returns the median in milliseconds and the last call's result."""

import statistics
import time


def median_ms(once, warmup, iters):
    for _ in range(warmup):
        once()
    times, result = [], None
    for _ in range(iters):
        start = time.perf_counter()
        result = once()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times), result
