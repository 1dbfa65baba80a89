"""Prove after deploy: the verification job, one sub-package per stage of a run, in the order a run goes.

    job.py, driver.py      the job's entry (spark-submit, `pubsubguard verify`) and the run it drives;
    config.py, target.py,  the run's options (one frozen RunConfig), the declared estate and the target, what a
    run_setup.py           probe run resolves before it creates anything; session.py (Spark), signals.py
                           (interrupts), failures.py (a Spark job's failure in one line), client_logs.py (the client
                           library's logs), footprint.py, judgement.py
                           (the evidence read and judged for the report), warmup.py
                           (the checks warmed up during the drain), bundle.py (the executors' Python),
                           selftest.py (`conform --self-test`)
    probe/                 the clients on the target: publisher and subscriber tasks (clients), the twins the probe
                           reads instead of the declared subscriptions, the push receiver, the run's identity and
                           access, the filter canary, the client-side faults, the drain (its tally, its clock)
    wire/                  the loopback gRPC proxy every channel crosses: the recording listeners (endpoints), the
                           fault layer (nemesis) and its schedule, packet faults (netem), the upstream link
    evidence/              what a run recorded: the records' format, the seal, where evidence is read from, the
                           directory locks
    checks/                the table of guarantees and everything that judges evidence: the pass (kernel, scans,
                           aggregates), its Spark run, the kept sorted input, the verdict, the findings'
                           vocabulary, endpoint pinning, config drift, the fault layer's rows read back
    report/                report.json's document from a judged run, and its rendering (JSON, HTML, terminal)
    conformance/           the scenarios that measure the target's documented behaviour, and the explainer of a
                           run's findings and guarantees (which scenario or planted fault explains each, what to do)
    watch/                 `pubsubguard watch`: the job's probe kept running, its evidence judged as it streams

The stages are ranked, top to bottom: watch/, the job's modules, report/, conformance/, probe/, then wire/ beside
checks/, then evidence/. A module imports its own stage and those ranked below it only; wire/ and checks/ never
import each other (tests/cli/test_architecture.py `RANKING`, drawn in docs/architecture.md).
"""
