"""``python -m benchmarks``: check, time and measure every workload; print and write the report."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

from .peers import PEERS  # (loads no numpy: the thread variables below must be set first)

HERE = Path(__file__).parent
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6")


def _choices(allowed: tuple[str, ...]):
    """An argument type: a comma-separated selection from ``allowed``, as a set."""

    def parse(text: str) -> set[str]:
        picked = {part.strip() for part in text.split(",") if part.strip()}
        unknown = sorted(picked - set(allowed))
        if unknown or not picked:
            raise argparse.ArgumentTypeError(f"{', '.join(unknown) or 'nothing'}: choose from {', '.join(allowed)}")
        return picked

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick run whose figures "
                        "mean nothing")
    parser.add_argument("--no-peers", action="store_true", help="measure tapekit and the floor only")
    parser.add_argument("--only", type=_choices(WORKLOADS), default=None,
                        help="run only these workloads, e.g. W3 or W1,W3 (default: all)")
    parser.add_argument("--peers", type=_choices(tuple(PEERS)), default=None,
                        help=f"measure only these peers, e.g. torch (default: every installed one; from "
                             f"{', '.join(PEERS)})")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per case (default 7)")
    parser.add_argument("--threads", type=int, default=1, help="threads for numpy's BLAS and PyTorch (default 1, "
                        "so figures do not depend on other work on the machine; 0: each library's default)")
    parser.add_argument("--out", type=Path, default=None, help="where results.md and results.png go (default: "
                        "beside this file; a --smoke run, or one with --only, writes them only when given --out)")
    args = parser.parse_args(argv)
    if args.threads and "numpy" not in sys.modules:  # BLAS reads these when numpy loads
        os.environ.update({name: str(args.threads) for name in THREAD_VARIABLES})
    # an empty cache for numba's compiled loops: a fused step's first call is timed compiling them
    os.environ["TAPEKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tapekit-bench-cache-")

    from . import machine, plot, report, suite
    from .peers import find_peers

    sizes = suite.SMOKE if args.smoke else suite.FULL
    if args.repeats is not None:
        sizes = dataclasses.replace(sizes, repeats=args.repeats)
    peers = find_peers(wanted=not args.no_peers, threads=args.threads, only=args.peers)
    before = os.getloadavg()[0]
    about = machine.describe(peers, args.threads)
    print("\n".join(about), flush=True)
    done = suite.run(sizes, peers, log=lambda line: print(line, flush=True), only=args.only)
    about.append(f"load average (1 min) of the machine: {before:.1f} when the run started, "
                 f"{os.getloadavg()[0]:.1f} when it ended")
    text = report.markdown(done, about, sizes.repeats, "results.png")
    out = args.out if args.out is not None or args.smoke or args.only else HERE
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        plot.figure(done, str(out / "results.png"), about[0])
        (out / "results.md").write_text(text, encoding="utf-8")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
