"""``gpulab`` on the command line.

gpulab info                      the tier, why, the device and library versions
gpulab kernels                   every kernel, its module and first docstring line
gpulab ptx NAME [--cc 8.0] [--dtype float64]
                                 a kernel's PTX for a real GPU architecture (no GPU needed)
gpulab ptx --all                 compile every kernel for 7.5, 8.0 and 9.0; exit 1 on failure
gpulab ptx --resources [NAME] [--cc 9.0] [--threads 256]
                                 registers, spills, shared memory and theoretical occupancy
gpulab release [--check]         regenerate the learner notebooks from solutions/
gpulab export-learner DIR [--update]
                                 a learners' copy of the course for a class repository: no
                                 solutions/, hidden tests, tests/ or instructor's guide
gpulab gpu-check [--plan] [--quick]
                                 on a GPU: every kernel checked, bench and chapter series
                                 recorded in gpulab/data/, every notebook run; a summary
gpulab doctor [--json]           check the environment; print each problem with its fix
gpulab bench [--gpu KEY] [--save results.json] [--record] [--load FILE]
             [--kernels saxpy,matmul_tiled] [--sizes N ...] [--matmul-sizes N ...]
                                 check, time and compare the kernel suite (chapters 02-03, training)
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

    try:
        return _compile(args, ptx, kernel_spec)
    except ptx.ToolkitMissingError as missing:
        print(f"gpulab ptx: {missing}", file=sys.stderr)
        return 1


def _compile(args, ptx, kernel_spec) -> int:
    if args.resources:
        return _resources(args, kernel_spec)
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


def _resources(args, kernel_spec) -> int:
    from gpulab import kernel_resources

    if args.threads > 1024:
        print("--threads must be at most 1024 (the per-block limit)", file=sys.stderr)
        return 2
    architectures = [tuple(cc) for cc in args.cc] if args.cc else [(9, 0)]
    for cc in architectures:
        if cc not in kernel_resources.SM_LIMITS:
            print(f"no SM limits for compute capability {cc[0]}.{cc[1]}; known: "
                  + ", ".join(f"{a}.{b}" for a, b in kernel_resources.SM_LIMITS), file=sys.stderr)
            return 2
    for cc in architectures:
        if args.name:
            try:
                kernel_spec(args.name)
            except KeyError as error:
                print(error.args[0], file=sys.stderr)
                return 2
            try:
                found = kernel_resources.resources(args.name, cc)
            except kernel_resources.AssemblyError as error:
                print(f"{args.name} cannot be assembled without a GPU: {error}", file=sys.stderr)
                return 1
            print(found)
            print(found.occupancy(args.threads))
        else:
            found, skipped = kernel_resources.all_resources(cc)
            print(kernel_resources.format_table(found, args.threads, skipped))
    return 0


def _doctor(args) -> int:
    from gpulab import doctor

    return doctor.main(["--json"] if args.json else [])


def _release(args) -> int:
    from gpulab.exercises import release

    return release.main(["--check"] if args.check else [])


def _bench(args) -> int:
    from gpulab import bench, device

    if args.load:
        try:
            report = bench.load_report(args.load)
        except (OSError, ValueError) as error:
            print(f"cannot read {args.load}: {error}", file=sys.stderr)
            return 2
        print(report.table())
        return 0
    if args.record and device.tier() != "gpu":
        print("--record keeps runs measured on a real GPU in gpulab/data/; this process has no "
              "GPU (tier sim), so there is nothing to record. Use --save FILE to keep this run.",
              file=sys.stderr)
        return 2
    kernels = bench.KERNELS
    if args.kernels:
        kernels = tuple(k.strip() for k in args.kernels.split(",") if k.strip())
    try:
        report = bench.run_suite(kernels=kernels, memory_sizes=args.sizes,
                                 matmul_sizes=args.matmul_sizes, gpu=args.gpu,
                                 stride=args.stride, tile=args.tile, repeats=args.repeats,
                                 progress=not args.no_progress)
    except ValueError as error:  # unknown kernel or GPU, bad stride or tile (InputError)
        print(f"gpulab bench: {error}", file=sys.stderr)
        return 2
    print(report.table())
    for path in [args.save, bench.record_path(report) if args.record else None]:
        if path:
            bench.save_report(path, report)
            print(f"saved to {path}")
    wrong = [k for k, text in report.checks.items() if not text.startswith("ok")]
    if wrong:
        print(f"WRONG ANSWERS from: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


def _model_check(args) -> int:
    from gpulab.bench import model_check

    return model_check.main()


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, not {value}")
    return value


def _add_bench(commands) -> None:
    from gpulab import hardware

    parser = commands.add_parser(
        "bench", help="check, time and compare the kernel suite (chapters 02-03, training)",
        description="Check every kernel against NumPy, time it (CUDA events on a GPU; in the "
        "simulator tier an estimate by gpulab's GPU model of a named GPU, whose error gpulab "
        "model-check measures), and compare measured rates with the datasheet peak, with a "
        "device copy or cuBLAS and with a baseline measured in the same run. Every figure says "
        "where it came from.")
    parser.add_argument("--gpu", help="GPU model for estimates and percentages, a key of "
                       f"gpulab.hardware.GPUS (default: {hardware.COURSE_GPU} without a GPU, the "
                       "local GPU's entry with one)")
    parser.add_argument("--kernels", help="comma-separated subset of: saxpy, copy_coalesced, "
                       "copy_strided, matmul_naive, matmul_tiled, matmul_register_blocked")
    parser.add_argument("--sizes", type=_positive_int, nargs="+",
                       help="vector lengths for saxpy and the copies")
    parser.add_argument("--matmul-sizes", type=_positive_int, nargs="+",
                       help="M = N = K for the matmuls")
    parser.add_argument("--stride", type=_positive_int, default=8,
                       help="stride of copy_strided (default 8)")
    parser.add_argument("--tile", type=_positive_int, default=16,
                       help="tile side of matmul_tiled (default 16)")
    parser.add_argument("--repeats", type=_positive_int, help="timed repeats per measurement")
    parser.add_argument("--save", metavar="FILE", help="write the run as JSON")
    parser.add_argument("--record", action="store_true",
                       help="GPU only: keep the run in gpulab/data/ for the course to show")
    parser.add_argument("--load", metavar="FILE", help="print a saved run instead of running")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=_bench)


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
    ptx.add_argument("--resources", action="store_true",
                     help="registers per thread, spills, shared memory and theoretical "
                          "occupancy from the assembler (ptxas via nvJitLink), no GPU needed")
    ptx.add_argument("--threads", type=_positive_int, default=256,
                     help="threads per block for the occupancy (default 256)")
    ptx.set_defaults(run=_ptx)
    doctor = commands.add_parser("doctor", help="check the environment; each problem with its fix")
    doctor.add_argument("--json", action="store_true", help="machine-readable findings")
    doctor.set_defaults(run=_doctor)
    release = commands.add_parser("release", help="regenerate learner notebooks")
    release.add_argument("--check", action="store_true", help="only report stale notebooks")
    release.set_defaults(run=_release)
    export = commands.add_parser(
        "export-learner", help="write a learners' copy of the course (no solutions, no hidden "
        "tests) for a class repository")
    export.set_defaults(run=lambda args: main(["export-learner"]))
    _add_bench(commands)
    model_check = commands.add_parser(
        "model-check",
        help="the GPU model against every published measurement on a real GPU: measured, "
             "predicted, ratio and source per point, median and worst ratio per kind")
    model_check.set_defaults(run=_model_check)
    gpu_check = commands.add_parser(
        "gpu-check",
        help="on a GPU: validate every kernel, run the bench and the chapters' GPU series, "
             "record them in gpulab/data/, run every notebook (--plan shows the steps)")
    gpu_check.set_defaults(run=lambda args: main(["gpu-check"]))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["gpu-check"]:  # its options are its own (gpulab.gpu_check.main parses them)
        from gpulab import gpu_check

        return gpu_check.main(argv[1:])
    if argv[:1] == ["export-learner"]:  # so are these (gpulab.exercises.export.main)
        from gpulab.exercises import export

        return export.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
