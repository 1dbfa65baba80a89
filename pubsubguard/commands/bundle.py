"""`pubsubguard bundle`: what spark-submit ships to a cluster (see pubsubguard.validation.bundle), and the line
that submits the verification job with it."""

from __future__ import annotations

import sys

from pubsubguard.validation import bundle
from pubsubguard.commands import options


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "bundle", "write the job's packages (zip) and a packed executor Python for spark-submit",
        exit_codes={0: "the bundle was written",
                    2: "bad option; the output directory is not writable; the environment cannot be built"},
        example="pubsubguard bundle --out out/bundle   # then run the spark-submit line it prints",
    )
    options.add_project_argument(parser)
    parser.add_argument("--out", type=options.output_directory, default=None, metavar="DIR",
                        help=f"write {bundle.ZIP_NAME} and {bundle.ENV_NAME} into DIR (default: <project>/out/bundle)")
    parser.add_argument("--master", default="spark://HOST:7077", help="the master shown in the printed spark-submit line")
    parser.set_defaults(run=run)


def run(args) -> int:
    out = args.out or options.require_writable(args.root / "out" / "bundle", "--out", directory=True)
    print(f"bundle: packing the executors' environment ({', '.join(bundle.requirements())})", file=sys.stderr)
    built = bundle.build(out)
    print(f"bundle: {built.zip_file} ({built.zip_file.stat().st_size / 2**10:.0f} KiB, {built.seconds['zip']:.1f} s), "
          f"{built.env_archive} ({built.env_archive.stat().st_size / 2**20:.0f} MiB, {built.seconds['env']:.1f} s)",
          file=sys.stderr)
    command = built.submit_command(args.master, driver_python=sys.executable)
    print("# client mode (the driver runs here; in cluster mode drop spark.pyspark.driver.python):", file=sys.stderr)
    print(bundle.shell_line(command) + " --plan PLAN --target gcp --report REPORT")
    return 0
