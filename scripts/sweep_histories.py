"""A broader, random sweep of the property test (CI runs a fixed, derandomized set).

    .venv/bin/python scripts/sweep_histories.py 12      # 12 random examples, 3 histories each

Runs tests/prove/checks/test_histories.py's property with fresh random workloads and seeds, without shrinking (a
failure is reported as found, with its seed and workload), and prints how many legal histories and
mutations were checked.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support: the model of legal histories (test code)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "prove" / "checks"))  # the property test

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import test_histories as T  # noqa: E402
from pubsubguard.validation.session import spark_session  # noqa: E402


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    spark = spark_session("local[2]", app_name="sweep-histories")
    inner = T.test_legal_histories_pass_and_every_mutation_is_caught.hypothesis.inner_test
    sweep = settings(
        max_examples=examples, derandomize=False, deadline=None, database=None,
        suppress_health_check=list(HealthCheck), phases=[Phase.generate],
    )(given(workload=T.workloads, seed=st.integers(0, 2**31 - 1))(inner))
    started = time.perf_counter()
    sweep(spark=spark)
    print(f"sweep ok: {T.COUNTS['histories']} legal histories, {T.COUNTS['mutations']} mutations, "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
