"""The `program` workload (issue 27 item 3): who touches what, as a scenario says it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import numasim
from numasim.realkernel import pacing

READER_WRITER = Path(numasim.__file__).parent / "validation" / "reader-writer-4k.toml"


def reader_writer(kernel: str, seconds: float = 10.0):
    text = READER_WRITER.read_text().replace('version = "6.12"', f'version = "{kernel}"')
    return numasim.run(text.replace("duration_s = 30.0", f"duration_s = {seconds}"))


@pytest.mark.parametrize("kernel", ["6.1", "6.12"])
def test_a_reader_pulls_the_pages_it_alone_reads_and_leaves_the_written_subset(kernel):
    # 64 MiB first touched on node 0; a reader on node 1 loads all of it, a writer on node 0
    # stores to the first 8 MiB. The pages only the reader touches fault on node 1 twice in a
    # row and migrate (should_numa_migrate_memory); the subset alternates between the two
    # threads' cpupids and stays. Every migration is the reader's.
    r = reader_writer(kernel)
    by_node = pacing.migrated_by_thread_node(r)
    assert by_node.get(1, 0) > 0.9 * 56 * 256 and by_node.get(0, 0) == 0, by_node
    c = r.counters
    assert c["numa_pages_migrated"] <= c["numa_hint_faults"] - c["numa_hint_faults_local"]
    assert c["pgalloc_normal"] >= 64 * 256  # the first touch; reads allocate nothing more


def test_load_streams_take_no_write_faults_where_a_store_would():
    # 4.0-rc4 drops the write bit on a hint fault (the changelog of seed 003's second patch):
    # a store after a hint fault takes a second fault (do_wp_page), a load does not.
    def faults(op: str) -> int:
        text = (READER_WRITER.read_text().replace('version = "6.12"', 'version = "4.0-rc4"')
                .replace("duration_s = 30.0", "duration_s = 8.0"))
        text = text.replace('ops = [{ op = "load", duration_s = 8.0 }]', f'ops = [{{ op = "{op}", duration_s = 8.0 }}]')
        c = numasim.run(text).counters
        return c["pgfault"] - c["numa_hint_faults"]
    assert faults("rmw") > faults("load") + 1000


def test_bad_programs_name_the_key():
    bad = READER_WRITER.read_text().replace('ops = [{ op = "load", duration_s = 30.0 }]', 'ops = [{ op = "load", buffer = 3 }]')
    with pytest.raises(numasim.ScenarioError) as info:
        numasim.resolve(bad)
    assert any(e["loc"].endswith("thread[0].ops[0].buffer") for e in info.value.errors), info.value.errors


SHARED_SWEEP = Path(numasim.__file__).parent / "validation" / "shared-sweep-4k.toml"


def two_streams(op: str, interleave: int):
    """shared-sweep-4k's machine and kernel (6.1), its workload written as a program whose two
    threads stream `op` over the buffer the main thread first touched."""
    head = SHARED_SWEEP.read_text().split("[[workload]]")[0].replace('version = "6.12"', 'version = "6.1"')
    # one rate for both loops (a memset per page and a load per line differ under TCG): the
    # two ops then cross the same pages in the same time
    head = re.sub(r"(?m)^(page_store_gibps|touch_gibps) = .*$", r"\1 = [[0.12, 0.12], [0.12, 0.12]]", head)
    body = ('[[workload]]\nkind = "program"\n[[workload.buffer]]\nsize_mib = 64\n'
            '[[workload.process]]\nnode = 0\nmain = [{ op = "store" }]\n'
            f'[[workload.process.thread]]\ncpus = [2]\nops = [{{ op = "{op}", duration_s = 10.0 }}]\n'
            f'[[workload.process.thread]]\ncpus = [1]\nops = [{{ op = "{op}", duration_s = 10.0 }}]\n'
            f'[run]\ninterleave_max_threads = {interleave}\n')
    return numasim.run(head + body)


@pytest.mark.parametrize("interleave", [0, 3])
def test_the_per_page_stream_takes_what_the_block_aggregated_one_takes(interleave):
    # A timed store stream is Op::Stream (one step per page), a timed rmw stream numaw's
    # streaming pass (Op::SweepFor, a step per clean block). On a private buffer already
    # written they reach the same pages with the same faults, so every count, collisions
    # included when the threads run interleaved, must be the same.
    a, b = two_streams("store", interleave).counters, two_streams("rmw", interleave).counters
    keys = ("numa_pages_migrated", "numa_hint_faults", "pgfault", "nr_tlb_remote_flush_received")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    if interleave:  # threads that meet at a page: the racing map forces flushes
        assert a["nr_tlb_remote_flush_received"] > 1000
