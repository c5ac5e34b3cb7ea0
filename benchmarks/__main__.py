"""``python -m benchmarks``: check, time and measure every workload; print and write the report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import machine, plot, report, suite
from .peers import find_peers

HERE = Path(__file__).parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat: a quick run that the figures "
                        "mean nothing for")
    parser.add_argument("--no-peers", action="store_true", help="measure tapekit and the floor only")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per case (at least 7 for the report)")
    parser.add_argument("--out", type=Path, default=HERE, help="where results.md and results.png go")
    args = parser.parse_args(argv)
    sizes = suite.SMOKE if args.smoke else suite.FULL
    if args.repeats is not None:
        sizes = suite.Sizes(**{**sizes.__dict__, "repeats": args.repeats})
    peers = find_peers(wanted=not args.no_peers)
    about = machine.describe(peers)
    print("\n".join(about), flush=True)
    done = suite.run(sizes, peers, log=lambda line: print(line, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    plot.figure(done, str(args.out / "results.png"), about[0])
    text = report.markdown(done, about, sizes.repeats, "results.png")
    (args.out / "results.md").write_text(text, encoding="utf-8")
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
