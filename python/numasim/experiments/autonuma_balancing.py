"""autonuma-balancing: autonuma-benchmark with kernel.numa_balancing off / on.

Machine: xeon-platinum-2n-128c (2 nodes, 128 CPUs, DDR5-class; the default).
The checks are the acceptance criteria of numasim's first issue; no changelog
publishes these runs for this machine, so the rows carry no reference values.
"""

from __future__ import annotations

from numasim.experiments.registry import Experiment, Row, register
from numasim.scenario import apply_overrides, to_toml

MACHINE = "xeon-platinum-2n-128c"
SEED = 1
TESTS = [
    "numa01",
    "numa01_THREAD_ALLOC",
    "numa02",
    "numa02_SMT",
    "numa02_HARD_BIND",  # baseline: best case, fully local
    "numa02_INVERSE_BIND",  # baseline: worst case, fully remote
]
COLUMNS = ["off", "on"]
COUNTERS = [
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "numa_pte_updates",
]
LOCAL_PCT_MIN = 80.0
HARD_BIND_TOLERANCE = 0.15
# Why the two numa02 convergence checks can fail since the process image (workload/image.rs)
# was modelled; the checks themselves were set for a bare buffer and are kept as they were.
STACKS_CAUSE = ("known cause: numa02's 128 thread stacks (8 MiB each, below the buffer) take the "
                "first pass's first 4 scan windows, because task_numa_work charges a chunk's whole "
                "range to its 256 MiB budget once one PTE in it changed (docs/model.md, Process image)")


def scenario(test: str, balancing: bool, overrides=None) -> dict:
    d = {
        "seed": SEED,
        "machine": {"profile": MACHINE},
        "kernel": {"numa_balancing": balancing},
        "workload": [{"kind": test}],
    }
    return apply_overrides(d, overrides or {})


@register
class AutonumaBalancing(Experiment):
    name = "autonuma-balancing"
    description = ("autonuma-benchmark (numa01, numa01_THREAD_ALLOC, numa02, numa02_SMT, "
                   "numa02 HARD/INVERSE_BIND) on xeon-platinum-2n-128c, balancing off vs on")
    columns = COLUMNS

    def scenarios(self, overrides=None) -> dict:
        return {(t, c): to_toml(scenario(t, c == "on", overrides)) for t in TESTS for c in COLUMNS}

    def evaluate(self, outcomes: dict) -> list:
        res = {k: o.result for k, o in outcomes.items()}
        rows = []
        for t in TESTS:
            def per_col(fn):
                return {c: (fn(res[t, c]) if res[t, c] is not None else None) for c in COLUMNS}

            rows.append(Row(f"{t} elapsed_s", per_col(lambda r: r.elapsed_s)))
            rows.append(Row(f"{t} system_s", per_col(lambda r: float(r.times["system_s"]))))
            for name in COUNTERS:
                rows.append(Row(f"{t} {name}", per_col(lambda r, n=name: int(r.counters[n]))))
            rows.append(Row(f"{t} hint_local_pct_last10",
                            per_col(lambda r: r.hint_local_percent(0.1))))
        rows += self._checks(res, outcomes)
        return rows

    @staticmethod
    def _name_cause(row: Row) -> None:
        if not row.ok:
            row.check += f"; {STACKS_CAUSE}"

    def _checks(self, res: dict, outcomes: dict) -> list:
        rows = []
        on, hard_on = res["numa02", "on"], res["numa02_HARD_BIND", "on"]
        off = res["numa02", "off"]
        hard_off, inv_off = res["numa02_HARD_BIND", "off"], res["numa02_INVERSE_BIND", "off"]

        pct, n, start = on.hint_local_tail(0.1) if on else (None, 0, 0.0)
        rows.append(Row(f"numa02 on: hint-local % over last 10% of time ≥ {LOCAL_PCT_MIN:g}", {"on": pct},
                        check=(f"≥ {LOCAL_PCT_MIN:g}, over {n} hint faults since t={start:.2f} s "
                               "(back to the last scan window that took faults if none fell in the last 10%)"),
                        ok=pct is not None and n > 0 and pct >= LOCAL_PCT_MIN))
        self._name_cause(rows[-1])

        if on and hard_on:
            rel = abs(on.elapsed_s - hard_on.elapsed_s) / hard_on.elapsed_s
            rule = (f"|on − HARD_BIND| / HARD_BIND ≤ {HARD_BIND_TOLERANCE:g} "
                    f"(numa02_HARD_BIND on: {hard_on.elapsed_s:.3f} s)")
        else:
            rel, rule = None, f"|on − HARD_BIND| / HARD_BIND ≤ {HARD_BIND_TOLERANCE:g}"
        rows.append(Row("numa02 on: elapsed within 15% of numa02_HARD_BIND", {"on": rel},
                        check=rule, ok=rel is not None and rel <= HARD_BIND_TOLERANCE))
        self._name_cause(rows[-1])

        faults = int(off.counters["numa_hint_faults"]) if off else None
        rows.append(Row("numa02 off: zero hint faults", {"off": faults},
                        check="numa_hint_faults == 0", ok=faults == 0, kind="invariant"))

        if off and hard_off and inv_off:
            e = off.elapsed_s
            rule = (f"HARD_BIND ({hard_off.elapsed_s:.3f} s) ≤ elapsed ≤ "
                    f"INVERSE_BIND ({inv_off.elapsed_s:.3f} s)")
            ok = hard_off.elapsed_s <= e <= inv_off.elapsed_s
        else:
            e, rule, ok = None, "HARD_BIND ≤ elapsed ≤ INVERSE_BIND", False
        rows.append(Row("numa02 off: HARD_BIND ≤ elapsed ≤ INVERSE_BIND", {"off": e},
                        check=rule, ok=ok))

        broken, first = {c: 0 for c in COLUMNS}, ""
        for (t, c), r in res.items():
            if r is None:
                continue
            try:
                r.check_invariants()
            except AssertionError as exc:
                broken[c] += 1
                first = first or f"; first: {t} {c}: {exc}"
        rows.append(Row("every run: invariants hold", broken,
                        check="runs violating = 0 (local ≤ faults, migrated ≤ pgmigrate_success, "
                        "monotonic series, memory ≤ capacity)"
                        + first, ok=not any(broken.values()), kind="invariant"))

        done, errors = {c: 0 for c in COLUMNS}, ""
        for (t, c), o in outcomes.items():
            if o.result is not None and o.result.completed:
                done[c] += 1
            elif o.error:
                errors = errors or f"; first: {t} {c}: {o.error}"
            else:
                errors = errors or f"; first: {t} {c}: hit run.max_sim_s"
        rows.append(Row("every test completes", done,
                        check=f"tests finished = {len(TESTS)} per column" + errors,
                        ok=all(v == len(TESTS) for v in done.values()), kind="invariant"))
        return rows
