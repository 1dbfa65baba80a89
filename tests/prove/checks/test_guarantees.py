"""The table of guarantees (validation/checks/guarantees.py) is the one place a guarantee is spelled: the kernel,
the finding kinds, the status fold and docs/checks.md all read it, and an entry the kernel cannot judge
fails at import."""

from __future__ import annotations

import dataclasses

import pytest

from pubsubguard.core.project import project_root
from pubsubguard.validation.checks import guarantees, kernel, verdict
from pubsubguard.validation.evidence.records import DeclaredSubscription
from pubsubguard.validation.checks.guarantees import GUARANTEES, Guarantee, GuaranteeTableError, check_table
from pubsubguard.validation.checks import findings


def test_the_kernel_judges_exactly_the_table_s_row_derived_guarantees_in_its_order():
    assert list(kernel.GUARANTEE_CHECKS) == [g.name for g in GUARANTEES if g.kernel is not None]
    for g in GUARANTEES:
        if g.kernel is not None:
            assert kernel.GUARANTEE_CHECKS[g.name] is getattr(kernel, g.kernel)
    assert check_table(GUARANTEES, vars(kernel)) == kernel.GUARANTEE_CHECKS


def test_a_guarantee_added_without_its_kernel_function_fails():
    bogus = Guarantee("ordering_per_region", len(GUARANTEES), "ordering_per_region", lambda sub, run: True, True,
                      {"region_out_of_order": "error"}, "every probed subscription")
    with pytest.raises(GuaranteeTableError, match="'ordering_per_region': its kernel function 'ordering_per_region' "
                                                  "is not in validation/checks/kernel.py"):
        check_table((*GUARANTEES, bogus), vars(kernel))
    # settled by deliveries (so judged from the message rows) but naming no function
    with pytest.raises(GuaranteeTableError, match="names no kernel function"):
        check_table((*GUARANTEES, dataclasses.replace(bogus, kernel=None)), vars(kernel))
    # a name that is not a function of the kernel
    with pytest.raises(GuaranteeTableError, match="is not in validation/checks/kernel.py"):
        check_table((*GUARANTEES, dataclasses.replace(bogus, kernel="CHUNK_ROWS")), vars(kernel))


def test_a_table_that_repeats_a_name_or_a_kind_fails():
    ordering = next(g for g in GUARANTEES if g.name == "ordering")
    again = dataclasses.replace(ordering, column=len(GUARANTEES))
    with pytest.raises(GuaranteeTableError, match="in the table twice"):
        check_table((*GUARANTEES, again), vars(kernel))
    with pytest.raises(GuaranteeTableError, match="'out_of_order' belongs to another guarantee"):
        check_table((*GUARANTEES, dataclasses.replace(again, name="ordering_again")), vars(kernel))
    with pytest.raises(GuaranteeTableError, match="expected each of 0..5 once"):
        check_table((*GUARANTEES, dataclasses.replace(again, name="ordering_again", column=0)), vars(kernel))
    with pytest.raises(GuaranteeTableError, match="severity error or advisory"):
        check_table((dataclasses.replace(ordering, column=0, kinds={"out_of_order": "fatal"}),), vars(kernel))


def test_finding_kinds_and_report_columns_come_from_the_table():
    assert findings.GUARANTEES == tuple(g.name for g in sorted(GUARANTEES, key=lambda g: g.column))
    assert findings.GUARANTEES == ("ordering", "exactly_once", "dead_letter", "completeness", "endpoint_pinning")
    from_table = {kind: (g.name, severity) for g in GUARANTEES for kind, severity in g.kinds.items()}
    assert {k: v for k, v in findings.FINDING_KINDS.items() if k != "config_drift"} == from_table
    assert findings.FINDING_KINDS["config_drift"] == ("config", "advisory")


def test_the_status_fold_reads_when_each_guarantee_is_declared_from_the_table():
    """A subscription declaring nothing but dead-lettering: every guarantee the table says it declares and the
    run exercised is judged, the others are not_tested (in the table's order)."""
    sub = DeclaredSubscription("s", "t", max_delivery_attempts=5, dead_letter_topic="d")
    status = verdict.guarantee_status([], sub, tested=True, poison_published=True)
    assert list(status) == list(findings.GUARANTEES)
    exercised = guarantees.Exercised(poison_published=True)
    assert status == {g.name: "holds" if g.declared(sub, exercised) else "not_tested" for g in GUARANTEES}
    assert status["dead_letter"] == "holds" and status["ordering"] == "not_tested"


def test_docs_checks_md_shows_the_table():
    doc = project_root() / "docs" / "checks.md"
    assert guarantees.documented_table(doc.read_text()) == guarantees.markdown_table(), (
        "docs/checks.md's guarantees table is not the table's: run "
        "`python -m pubsubguard.validation.checks.guarantees --update-doc docs/checks.md`")


def test_update_doc_rewrites_only_the_generated_section(tmp_path):
    page = tmp_path / "checks.md"
    page.write_text(f"# doc\n\n{guarantees.DOC_BEGIN}\nSTALE ROW\n{guarantees.DOC_END}\n\nafter\n")
    guarantees.update_doc(page)
    text = page.read_text()
    assert "STALE ROW" not in text and text.startswith("# doc\n\n") and text.endswith("\n\nafter\n")
    assert "| endpoint_pinning | `ordering` or `exactly_once` declared" in text
    assert "`dead_letter_early`*" in text and "`lost`," in text


# -- each finding kind's wording (validation/checks/wording.py), checked at import as the kernel is ----------

def test_every_finding_kind_and_form_has_its_sentence():
    from pubsubguard.validation.checks import wording

    assert set(wording.WORDING) == set(findings.FINDING_KINDS)
    for kind, forms in findings.FORMS.items():
        assert set(forms) <= set(wording.WORDED_FORMS[kind]), kind
    wording.check_wording(wording.WORDING, wording.WORDED_FORMS)


def test_a_kind_or_form_added_without_its_sentence_fails():
    from pubsubguard.validation.checks import wording
    from pubsubguard.validation.checks.wording import WordingError, check_wording

    kinds = {**findings.FINDING_KINDS, "region_out_of_order": ("ordering", "error")}
    with pytest.raises(WordingError, match="'region_out_of_order': no sentence for it in validation/checks/wording.py"):
        check_wording(wording.WORDING, wording.WORDED_FORMS, kinds=kinds)
    forms = {**findings.FORMS, "out_of_order": (*findings.FORMS["out_of_order"], "interleaved")}
    with pytest.raises(WordingError, match="'out_of_order': form 'interleaved' is not among the forms"):
        check_wording(wording.WORDING, wording.WORDED_FORMS, forms=forms)
    stray = {**wording.WORDING, "lost_twice": wording.WORDING["lost"]}
    with pytest.raises(WordingError, match="finding kind 'lost_twice' is not in the findings' vocabulary"):
        check_wording(stray, wording.WORDED_FORMS)
    with pytest.raises(WordingError, match="'lost': worded twice"):
        wording.words("lost")(lambda finding, at: "again")
    assert wording.WORDING["lost"].__name__ == "_lost"  # the refused registration changed nothing


def test_the_wording_table_is_checked_when_it_is_imported(tmp_path):
    """A kind planted in the vocabulary before the wording module is imported fails its import."""
    import subprocess
    import sys

    planted = (
        "from pubsubguard.validation.checks import findings\n"
        "findings.FINDING_KINDS['region_out_of_order'] = ('ordering', 'error')\n"
        "from pubsubguard.validation.checks import wording\n"
    )
    done = subprocess.run([sys.executable, "-c", planted], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "WordingError: finding kind 'region_out_of_order': no sentence for it" in done.stderr
    clean = subprocess.run([sys.executable, "-c", planted.splitlines()[0] + "\n" + planted.splitlines()[2]],
                           capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stderr
