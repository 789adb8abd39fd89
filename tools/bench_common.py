"""What the Python benchmark scripts in tools/ share: sizes as the command lines write them,
the percentile the C++ benchmarks report (nearest rank, as comm_bench computes it), and
comm_bench's --json rows (read by the comparison scripts)."""

import json


def parse_size(s):
    """'8' -> 8, '1K' -> 1024, '64M' -> 67108864."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def percentile(v, p):
    """The nearest-rank p-th percentile of the samples v."""
    v = sorted(v)
    k = max(1, min(len(v), int(-(-p * len(v) // 100))))
    return v[k - 1]


def comm_bench_median_p90(path):
    """(median_us, p90_us) of the first row of a comm_bench --json file, its in-place half
    or else its out-of-place one; None when the run left no readable row."""
    try:
        row = json.load(open(path))["results"][0]
        half = row.get("in_place") or row["out_of_place"]
        return (half["median_us"], half["p90_us"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
