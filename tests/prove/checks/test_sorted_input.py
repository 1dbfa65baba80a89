"""The checks' sorted input kept beside the evidence (validation/checks/sorted_input.py): a re-check that reads
it finds what the shuffle pass finds, anything that could make it stale (another run's included) sends the
check back to the shuffle pass, and a kept input of these sources that is damaged is named in one line.
Legal histories of the model and every mutation of them, written as a probe writes them."""

from __future__ import annotations

import json
import os
import random
import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support import histories as H
from pubsubguard.validation.checks import run as checks, kernel, sorted_input
from pubsubguard.validation.evidence import seal
from pubsubguard.validation.checks.run import run_checks
from pubsubguard.validation.evidence.records import DeclaredSubscription, EvidenceError
from pubsubguard.validation.evidence.store import read_evidence

SUBSCRIPTIONS = [
    DeclaredSubscription("plain", "t-plain"),
    DeclaredSubscription("ordered", "t-ordered", ordering=True),
    DeclaredSubscription("eod", "t-eod", exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("dl-ordered", "t-dl-ordered", ordering=True, max_delivery_attempts=5, dead_letter_topic="t-dlq"),
]
WORKLOAD = H.Workload(keys=4, messages_per_key=8, poison_rate=0.15, fault_rate=0.5, duplicate_rate=0.5, max_batch=3)


def merged_history(seed: int) -> H.History:
    legal = H.generate(SUBSCRIPTIONS, WORKLOAD, seed, run_id="run-kept")
    copies = [H.renamed(legal, "~legal")]
    for i, (name, mutate) in enumerate(H.MUTATORS.items()):
        result = mutate(legal, random.Random(seed * 100 + i))
        if result is not None:
            copies.append(H.renamed(result[0], f"~m{i}"))
    return H.History(legal.run_id, [s for h in copies for s in h.subscriptions],
                     [p for h in copies for p in h.publishes], [d for h in copies for d in h.deliveries])


def written(tmp_path, history: H.History, name: str = "evidence"):
    return H.write_evidence(tmp_path / name, history.run_id, history.subscriptions, history.publish_table(),
                            history.delivery_table(), row_group_size=500, bucketed=False)  # the shuffle pass keeps its input


def verdict(results) -> tuple:
    return results.findings, results.stats, results.plot, results.poison_published  # each in one order


def check(spark, directory, subscriptions=None, keep=True, **options):
    info, publishes, deliveries, _ = read_evidence(spark, directory)
    return run_checks(publishes, deliveries, subscriptions or info.subscriptions,
                      evidence_dir=directory if keep else None, **options)


@pytest.mark.parametrize("seed,chunk_rows,name", [(0, None, "evidence"), (7, 3, "run 7 évidence%20")])
def test_a_re_check_reads_the_kept_input_and_finds_what_the_shuffle_pass_finds(spark, tmp_path, monkeypatch, seed,
                                                                                chunk_rows, name):
    directory = written(tmp_path, merged_history(seed), name)  # a path Spark's file URIs must escape
    options = {"chunk_rows": chunk_rows} if chunk_rows else {}
    shuffled = check(spark, directory, keep=False, **options)
    assert shuffled.sorted_input is None
    expected = verdict(shuffled)
    assert expected[0], "the mutations raise findings"

    first = check(spark, directory, **options)
    assert first.sorted_input.startswith("checks: kept the sorted input in ")
    manifest = json.loads((directory / sorted_input.DIRNAME / sorted_input.MANIFEST).read_text())
    assert manifest["rows"] == sum(p["rows"] for p in manifest["parts"]) > len(H.History.delivery_table(merged_history(seed)))
    assert verdict(first) == expected

    # the re-check names the keys of its findings from the names kept with the input: no read of the log's keys
    key_reads = []
    read_key_names = checks._key_names
    monkeypatch.setattr(checks, "_key_names", lambda *args: key_reads.append(args) or read_key_names(*args))
    assert manifest["names"]["keys"], "the findings' keys are named in the manifest"
    again = check(spark, directory, **options)
    assert again.sorted_input.startswith("checks: read the sorted input an earlier check kept")
    assert verdict(again) == expected
    assert key_reads == []

    # names that do not cover what the re-check wants (none kept here): it reads them from the log
    manifest["names"] = {"wanted": [], "keys": []}
    (directory / sorted_input.DIRNAME / sorted_input.MANIFEST).write_text(json.dumps(manifest))
    unnamed = check(spark, directory, **options)
    assert unnamed.sorted_input.startswith("checks: read the sorted input an earlier check kept")
    assert verdict(unnamed) == expected
    assert len(key_reads) == 1


def test_what_the_kept_input_was_not_made_from_sends_the_check_back_to_the_shuffle(spark, tmp_path):
    history = merged_history(3)
    directory = written(tmp_path, history)
    kept_dir = directory / sorted_input.DIRNAME
    check(spark, directory)
    assert check(spark, directory).sorted_input.startswith("checks: read")

    # another set of subscriptions (one left out)
    fewer = check(spark, directory, subscriptions=history.subscriptions[1:])
    assert fewer.sorted_input.startswith("checks: kept")
    assert verdict(fewer) == verdict(check(spark, directory, subscriptions=history.subscriptions[1:], keep=False))
    check(spark, directory)  # kept again for all of them

    # a part file added to the log: a delivery this run never published
    extra = dict(history.deliveries[0], message_id="m-extra", seq=10_000)
    pq.write_table(pa.Table.from_pylist([extra], schema=history.delivery_table().schema),
                   directory / "deliveries" / "part-late.parquet")
    with pytest.raises(EvidenceError, match="extra deliveries/part-late.parquet"):
        check(spark, directory)  # not as sealed: refused (tests/test_seal.py); sealed again, it is the run's
    seal.seal(directory, history.run_id)
    grown = check(spark, directory)
    assert grown.sorted_input.startswith("checks: kept")
    assert any(f["kind"] == "unexpected" and f["seq"] == 10_000 for f in grown.findings)
    assert verdict(grown) == verdict(check(spark, directory, keep=False))
    assert check(spark, directory).sorted_input.startswith("checks: read")

    # a part file rewritten (same name, another modification time)
    part = directory / "publishes" / "part-00000.parquet"
    os.utime(part, ns=(part.stat().st_atime_ns, part.stat().st_mtime_ns + 1_000_000_000))
    assert check(spark, directory).sorted_input.startswith("checks: kept")

    # another run.json beside the same part files (another run's record): the kept input is not read
    run_json = (directory / "run.json").read_text()
    (directory / "run.json").write_text(run_json.replace('"histories"', '"another run"'))
    seal.seal(directory, history.run_id)
    assert check(spark, directory).sorted_input.startswith("checks: kept")
    (directory / "run.json").write_text(run_json)
    seal.seal(directory, history.run_id)
    assert check(spark, directory).sorted_input.startswith("checks: kept")
    assert check(spark, directory).sorted_input.startswith("checks: read")

    # a kept input made from these sources but damaged: one line naming the file (exit 2 from verify)
    def kept_file():
        manifest = json.loads((kept_dir / sorted_input.MANIFEST).read_text())
        return kept_dir / manifest["generation"] / manifest["parts"][0]["file"]

    def damaged(match: str) -> None:
        with pytest.raises(EvidenceError, match=match):
            check(spark, directory)
        shutil.rmtree(kept_dir)  # the remedy the line names: the next check keeps it anew
        assert check(spark, directory).sorted_input.startswith("checks: kept")

    original = kept_file()
    original.unlink()
    damaged(f"{original}: missing from the kept sorted input; delete {kept_dir}")
    original = kept_file()
    original.write_bytes(original.read_bytes() + b"x")
    damaged(r"damaged kept sorted input \([0-9,]+ bytes, the manifest says")
    original = kept_file()
    data = bytearray(original.read_bytes())
    data[8:-8] = bytes(len(data) - 16)  # same size, zeroed inside
    original.write_bytes(bytes(data))
    damaged("its SHA-256 is not the manifest's")
    (kept_dir / sorted_input.MANIFEST).write_text("{not json")
    damaged(f"{kept_dir / sorted_input.MANIFEST}: damaged kept sorted input: truncated at line 1")
    manifest = json.loads((kept_dir / sorted_input.MANIFEST).read_text())
    manifest["parts"][0]["file"] = "../../publishes/part-00000.parquet"
    (kept_dir / sorted_input.MANIFEST).write_text(json.dumps(manifest))
    damaged("outside its generation")
    result = check(spark, directory)
    assert result.sorted_input.startswith("checks: read")
    assert verdict(result) == verdict(check(spark, directory, keep=False))
    # one generation stays: the older ones are removed when a newer one is kept
    assert [p.name for p in kept_dir.iterdir() if p.is_dir()] == [json.loads((kept_dir / sorted_input.MANIFEST).read_text())["generation"]]


def test_frames_that_do_not_read_exactly_the_logs_part_files_keep_nothing(spark, tmp_path):
    history = merged_history(8)
    directory = written(tmp_path, history)
    (directory / "deliveries" / "_SUCCESS").write_text("")  # skipped by Spark, as by the check
    info, publishes, deliveries, _ = read_evidence(spark, directory)
    expected = verdict(run_checks(publishes, deliveries, info.subscriptions))

    # a file that arrives after the frames were made (a probe still writing): they do not read it
    extra = dict(history.deliveries[0], message_id="m-after", seq=20_000)
    pq.write_table(pa.Table.from_pylist([extra], schema=history.delivery_table().schema),
                   directory / "deliveries" / "part-after.parquet")
    late = run_checks(publishes, deliveries, info.subscriptions, evidence_dir=directory)
    assert late.sorted_input.startswith("checks: nothing kept in ")
    assert verdict(late) == expected
    assert not (directory / sorted_input.DIRNAME).exists()

    # frames that read part of the log only
    one_file = spark.read.parquet(str(directory / "deliveries" / "part-00000.parquet"))
    partial = run_checks(publishes, one_file, info.subscriptions, evidence_dir=directory)
    assert partial.sorted_input.startswith("checks: nothing kept in ")
    assert not (directory / sorted_input.DIRNAME).exists()

    # the same files read again (the late part removed: it is not sealed): kept, with the marker file beside
    # them; and found through a symlink
    (directory / "deliveries" / "part-after.parquet").unlink()
    assert check(spark, directory).sorted_input.startswith("checks: kept")
    (tmp_path / "link").symlink_to(directory)
    assert check(spark, tmp_path / "link").sorted_input.startswith("checks: read")


def test_a_part_file_changed_while_the_pass_reads_keeps_nothing(spark, tmp_path, monkeypatch):
    from pubsubguard.validation.checks import run as checks

    directory = written(tmp_path, merged_history(9))
    part = directory / "deliveries" / "part-00000.parquet"
    one_pass = checks._one_pass

    def touched_meanwhile(*args, **kwargs):  # after the check listed its sources, before the pass runs
        os.utime(part, ns=(part.stat().st_atime_ns, part.stat().st_mtime_ns + 1_000_000_000))
        return one_pass(*args, **kwargs)

    monkeypatch.setattr(checks, "_one_pass", touched_meanwhile)
    result = check(spark, directory)
    assert result.sorted_input.startswith("checks: could not keep the sorted input")
    assert not (directory / sorted_input.DIRNAME).exists()
    monkeypatch.setattr(checks, "_one_pass", one_pass)
    assert check(spark, directory).sorted_input.startswith("checks: kept")


def test_other_code_does_not_read_what_this_code_kept(spark, tmp_path):
    history = merged_history(4)
    directory = written(tmp_path, history)
    check(spark, directory)

    class Other:  # another version of the code that packs the rows
        __file__ = "checks_v2.py"

        class __loader__:
            @staticmethod
            def get_data(path):
                return b"# another version\n"

    assert sorted_input.Kept.of(directory, history.subscriptions, checks._SHAPING_MODULES).find()
    assert sorted_input.Kept.of(directory, history.subscriptions, (Other, *checks._SHAPING_MODULES[1:])).find() is None


def test_code_shipped_in_a_zip_is_digested_as_a_file_is(tmp_path):
    """A cluster's executors and driver import pubsubguard from the bundle's zip (validation/bundle.py)."""
    import importlib.util
    import zipfile
    import zipimport

    from pubsubguard.validation.checks import kernel

    source = b"VALUE = 1\n"
    (tmp_path / "plain_module.py").write_bytes(source)
    with zipfile.ZipFile(tmp_path / "bundle.zip", "w") as bundle:
        bundle.writestr("zipped_module.py", source)
    def loaded(spec):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    zipped = loaded(zipimport.zipimporter(str(tmp_path / "bundle.zip")).find_spec("zipped_module"))
    assert ".zip" in zipped.__file__
    plain = loaded(importlib.util.spec_from_file_location("plain_module", tmp_path / "plain_module.py"))
    evidence = tmp_path / "evidence"
    in_zip = sorted_input.Kept.of(evidence, SUBSCRIPTIONS, (zipped, kernel))
    assert in_zip is not None and in_zip.sources == sorted_input.Kept.of(evidence, SUBSCRIPTIONS, (plain, kernel)).sources


def test_a_directory_that_cannot_be_written_is_checked_without_keeping(spark, tmp_path):
    directory = written(tmp_path, merged_history(5))
    (directory / sorted_input.DIRNAME).write_text("a file where the kept input would go")
    result = check(spark, directory)
    assert result.sorted_input.startswith("checks: could not keep the sorted input")
    assert verdict(result) == verdict(check(spark, directory, keep=False))


def test_a_check_that_fails_keeps_nothing(spark, tmp_path):
    history = merged_history(6)
    bad = dict(history.deliveries[0], ack_deadline_s=10**9)  # out of range: the pass raises
    history = H.History(history.run_id, history.subscriptions, history.publishes, history.deliveries + [bad])
    directory = written(tmp_path, history)
    with pytest.raises(Exception, match="ack_deadline_s must be within"):
        check(spark, directory)
    assert not (directory / sorted_input.DIRNAME).exists()


def test_verify_from_evidence_keeps_and_reads_it_and_no_checks_input_does_neither(spark, tmp_path, capsys):
    from pubsubguard.validation import job

    directory = written(tmp_path, merged_history(12))
    kept_dir = directory / sorted_input.DIRNAME

    def verify(*options) -> tuple[int, str]:
        code = job.main(["--from-evidence", str(directory), "--report", str(tmp_path / "report"), "--no-progress",
                         *options], spark=spark)
        return code, capsys.readouterr().err

    code, err = verify("--no-checks-input")
    assert code == 1 and "checks:" not in err and not kept_dir.exists()
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    code, err = verify()
    assert code == 1 and f"checks: kept the sorted input in {kept_dir}" in err
    assert json.loads((tmp_path / "report" / "report.json").read_text())["subscriptions"] == report["subscriptions"]
    code, err = verify()
    assert code == 1 and f"checks: read the sorted input an earlier check kept in {kept_dir}" in err
    assert json.loads((tmp_path / "report" / "report.json").read_text())["subscriptions"] == report["subscriptions"]
    manifest = (kept_dir / sorted_input.MANIFEST).read_text()
    code, err = verify("--no-checks-input")  # a kept input is not read either, nor touched
    assert code == 1 and "checks:" not in err and (kept_dir / sorted_input.MANIFEST).read_text() == manifest


# the packed layout of `meta` (validation/checks/chunk.py), and another that packs the same facts: a subscription
# index of 11 bits from bit 5, the ack deadline in the 16 bits above it
LAYOUT = "SUB_BITS, DEADLINE_SHIFT, DEADLINE_BITS = 12, 17, 15\n"


OTHER_LAYOUT = "SUB_BITS, DEADLINE_SHIFT, DEADLINE_BITS = 11, 16, 16\n"


def test_a_kept_input_packed_in_another_layout_is_not_read(spark, tmp_path, capsys):
    """A version of the code whose packed layout (`chunk.py`) differs checks the same evidence: driver and
    executors import it from a bundle zip (validation/bundle.py) in a verify process of its own (in another
    directory: the checkout's own `pubsubguard/` would come first on the path). It does not
    read what this code kept, nor this code what it kept; both keep their own and give the same report."""
    import subprocess
    import sys
    import zipfile

    from pubsubguard.validation import bundle, job

    directory = written(tmp_path, merged_history(5))
    manifest_path = directory / sorted_input.DIRNAME / sorted_input.MANIFEST

    def verify_here(report: str) -> str:
        assert job.main(["--from-evidence", str(directory), "--report", str(tmp_path / report), "--no-progress"],
                        spark=spark) == 1
        return capsys.readouterr().err

    def verify_other(report: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pubsubguard.validation.job", "--from-evidence", str(directory),
                               "--report", str(tmp_path / report), "--no-progress"],
                              env={**os.environ, "PYTHONPATH": str(other)}, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 1, done.stderr
        return done.stderr

    def subscriptions(report: str) -> dict:
        """The report's verdict per subscription; its findings' ids (numbered in the order the pass's partitions
        give them, 8 in that process, the tests' session's 4 here) masked."""
        text = (tmp_path / report / "report.json").read_text()
        return json.loads(re.sub(r'"finding-[0-9]+"', '"finding-N"', text))["subscriptions"]

    def code_digest() -> str:
        return json.loads(manifest_path.read_text())["sources"]["code"]

    assert f"checks: kept the sorted input in {manifest_path.parent}" in verify_here("here")
    kept_here = code_digest()

    # the same package with the other layout of `meta`
    other = tmp_path / "other-layout.zip"
    bundle.write_zip(tmp_path / "this-layout.zip")
    with zipfile.ZipFile(tmp_path / "this-layout.zip") as this, zipfile.ZipFile(other, "w") as changed:
        for entry in this.infolist():
            data = this.read(entry)
            if entry.filename == "pubsubguard/validation/checks/chunk.py":
                assert data.decode().count(LAYOUT) == 1, "the layout line this test changes"
                data = data.decode().replace(LAYOUT, OTHER_LAYOUT).encode()
            changed.writestr(entry, data)
    probe = subprocess.run([sys.executable, "-c", "from pubsubguard.validation.checks import chunk; "
                            "print(chunk.__file__, chunk.DEADLINE_SHIFT, chunk.MAX_SUBSCRIPTIONS)"],
                           env={**os.environ, "PYTHONPATH": str(other)}, cwd=tmp_path, capture_output=True, text=True,
                           check=True)
    assert probe.stdout.split()[1:] == ["16", "2048"] and ".zip" in probe.stdout, probe.stdout

    err = verify_other("other")
    assert f"checks: kept the sorted input in {manifest_path.parent}" in err, err  # not read: another layout
    assert code_digest() != kept_here
    assert subscriptions("other") == subscriptions("here")
    assert "checks: read the sorted input" in verify_other("other-again")
    assert subscriptions("other-again") == subscriptions("here")

    # and this code does not read what the other layout kept
    assert f"checks: kept the sorted input in {manifest_path.parent}" in verify_here("here-again")
    assert code_digest() == kept_here
    assert subscriptions("here-again") == subscriptions("here")
