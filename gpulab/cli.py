"""``gpulab`` on the command line.

gpulab info                      the tier, why, the device and library versions
gpulab kernels                   every kernel, its module and first docstring line
gpulab ptx NAME [--cc 8.0] [--dtype float64]
                                 a kernel's PTX for a real GPU architecture (no GPU needed)
gpulab ptx --all                 compile every kernel for 7.5, 8.0 and 9.0; exit 1 on failure
gpulab release [--check]         regenerate the learner notebooks from solutions/
"""

from __future__ import annotations

import argparse
import sys


def _parse_cc(text: str) -> tuple[int, int]:
    try:
        major, minor = text.split(".")
        return int(major), int(minor)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"compute capability looks like 8.0, not {text!r}"
        ) from None


def _info(args) -> int:
    import gpulab

    gpulab.info()
    return 0


def _kernels(args) -> int:
    from gpulab.kernels.registry import load_all

    for name, spec in sorted(load_all().items()):
        flag = "  [GPU only]" if spec.gpu_only else ""
        print(f"{name:24s} {spec.module:28s} {spec.summary}{flag}")
    return 0


def _ptx(args) -> int:
    from gpulab import ptx
    from gpulab.kernels.registry import kernel_spec

    if args.all:
        results = ptx.compile_all(tuple(args.cc) if args.cc else ptx.ARCHITECTURES)
        for r in results:
            status = "ok" if r.ok else f"FAILED: {r.error.splitlines()[0] if r.error else ''}"
            cc = f"sm_{r.compute_capability[0]}{r.compute_capability[1]}"
            print(f"{r.kernel:24s} {cc:6s} {r.signature:55s} {status}")
        failed = sum(not r.ok for r in results)
        print(f"{len(results) - failed} compiled, {failed} failed")
        return 1 if failed else 0
    if not args.name:
        print("give a kernel name (see `gpulab kernels`) or --all", file=sys.stderr)
        return 2
    try:
        spec = kernel_spec(args.name)
    except KeyError as error:
        print(error.args[0], file=sys.stderr)
        return 2
    matching = [s for s in spec.signatures if args.dtype in s] or list(spec.signatures)
    cc = args.cc[0] if args.cc else (8, 0)
    print(ptx.kernel_ptx(args.name, cc, matching[0]))
    return 0


def _release(args) -> int:
    from gpulab.exercises import release

    return release.main(["--check"] if args.check else [])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpulab", description="How neural networks use GPUs.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="tier, device and versions").set_defaults(run=_info)
    commands.add_parser("kernels", help="list every kernel").set_defaults(run=_kernels)
    ptx = commands.add_parser("ptx", help="show a kernel's PTX, or compile every kernel")
    ptx.add_argument("name", nargs="?", help="kernel name, e.g. dot_shared_tree")
    ptx.add_argument("--cc", type=_parse_cc, action="append", help="compute capability, e.g. 9.0")
    ptx.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ptx.add_argument("--all", action="store_true", help="compile every kernel")
    ptx.set_defaults(run=_ptx)
    release = commands.add_parser("release", help="regenerate learner notebooks")
    release.add_argument("--check", action="store_true", help="only report stale notebooks")
    release.set_defaults(run=_release)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
