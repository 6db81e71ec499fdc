"""Threads that meet the migration entries of a migrate_pages(2) call of their process
(mm/migration_entry.rs, issue 27): migratepages-4k, a toucher's two threads streaming over the
buffer that `migratepages` moves 0 -> 1 -> 0."""

from __future__ import annotations

from pathlib import Path

import numasim

SCENARIO = Path(numasim.__file__).parent / "validation" / "migratepages-4k.toml"


def test_a_thread_asleep_on_a_migration_entry_is_not_interrupted_by_the_batch_flush():
    r = numasim.run(SCENARIO.read_text())  # 6.12: 512-page batches, one flush each
    c = r.counters
    batches = c["nr_tlb_remote_flush"]
    assert batches >= 2 * 8192 // 512
    # each batch's flush would interrupt both streaming threads (2 per batch); a thread that
    # reached an unmapped page sleeps in migration_entry_wait, its CPU idle in lazy TLB mode
    assert c["nr_tlb_remote_flush_received"] < 1.5 * batches, c
    # they slept there: a fault each time, beyond the buffer's first touches
    assert r.processes[0]["migration_wait_s"] > 0
    assert c["pgfault"] > 8192 + c["nr_tlb_remote_flush"] - c["nr_tlb_remote_flush_received"] // 2, c
    assert c["pgmigrate_success"] >= 2 * 8192


def test_before_the_batched_flush_every_folio_is_flushed_alone_and_its_thread_is_awake():
    # 6.1: unmap_and_move flushes each page as it unmaps it; the thread woken by the previous
    # page's remap is back on its CPU by then, so each flush reaches both threads' CPUs
    r = numasim.run(SCENARIO.read_text().replace('version = "6.12"', 'version = "6.1"'))
    c = r.counters
    assert c["nr_tlb_remote_flush"] >= 2 * 8192
    assert c["nr_tlb_remote_flush_received"] > 1.9 * c["nr_tlb_remote_flush"], c
