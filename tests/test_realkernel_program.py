"""The real-kernel side of the `program` workload kind: its `numaw program` line (spec.py), and
numaw running programs on this host (node 0 only, tiny buffers, fractions of a second; no VM)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from numasim.realkernel import spec, vm
from numasim.realkernel.console import build_result, parse_console
from numasim.realkernel.errors import RealKernelError


@pytest.fixture(scope="module")
def numaw(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc (system-packages.txt) is not installed")
    return vm.build_numaw(tmp_path_factory.mktemp("numaw"))


def stream(op, buffer=0, size_mib=64, offset_mib=0, stride=1, passes=None, duration_s=None):
    return {"op": op, "buffer": buffer, "offset_mib": offset_mib, "size_mib": size_mib, "stride": stride,
            "passes": passes, "duration_s": duration_s}


def proc(main=(), threads=(), parent=None, node=None, cpus=None):
    return {"parent": parent, "node": node, "cpus": cpus, "main": list(main), "threads": list(threads)}


def thread(ops, count=1, node=None, cpus=None):
    return {"count": count, "node": node, "cpus": cpus, "ops": list(ops)}


def program(buffers, processes, start_s=0.0):
    return {"kind": "program", "start_s": start_s, "image": "numaw", "buffers": buffers, "processes": processes}


def buf(size_mib, mapping="private", madvise="none"):
    return {"size_mib": size_mib, "mapping": mapping, "madvise": madvise}


def line(w):
    return spec.workload_lines({"workloads": [w]})[0]


# the reader/writer example of docs/scenario.md, as the engine resolves it
READER_WRITER = program([buf(64)], [proc(
    node=0, main=[stream("store", passes=1)],
    threads=[thread([stream("load", duration_s=30.0)], node=1),
             thread([stream("store", size_mib=8, duration_s=30.0)])])])


def test_the_docs_example_becomes_one_numaw_program_line():
    assert line(READER_WRITER) == (
        "program buffers=64:private:none processes=process:node=0"
        "/store:buffer=0:offset_mib=0:size_mib=64:stride=1:passes=1"
        "/thread:count=1:node=1/load:buffer=0:offset_mib=0:size_mib=64:stride=1:duration_s=30.0"
        "/thread:count=1/store:buffer=0:offset_mib=0:size_mib=8:stride=1:duration_s=30.0 start_s=0.0")


def test_forks_shared_buffers_and_the_other_ops_are_written_out():
    w = program([buf(16, "shmem"), buf(8, madvise="hugepage")], [
        proc(cpus=[0, 1], main=[stream("store", size_mib=16, passes=1)]),
        proc(parent=0, main=[{"op": "set_mempolicy", "mode": "bind", "nodes": [1]},
                             stream("rmw", buffer=1, size_mib=8, stride=4, passes=2),
                             {"op": "set_mempolicy", "mode": "default", "nodes": []}],
             threads=[thread([{"op": "affinity", "node": 0, "cpus": None}, {"op": "sleep", "duration_s": 0.5},
                              stream("load", size_mib=4, offset_mib=12, duration_s=2.5)], count=4, cpus=[2, 3])]),
        proc(parent=1, node=1, main=[{"op": "set_mempolicy", "mode": "preferred", "nodes": [0]}]),
    ], start_s=1.5)
    assert line(w) == (
        "program buffers=16:shmem:none,8:private:hugepage processes="
        "process:cpus=0,1/store:buffer=0:offset_mib=0:size_mib=16:stride=1:passes=1"
        "/process:parent=0/set_mempolicy:mode=bind:nodes=1/rmw:buffer=1:offset_mib=0:size_mib=8:stride=4:passes=2"
        "/set_mempolicy:mode=default"
        "/thread:count=4:cpus=2,3/affinity:node=0/sleep:duration_s=0.5"
        "/load:buffer=0:offset_mib=12:size_mib=4:stride=1:duration_s=2.5"
        "/process:parent=1:node=1/set_mempolicy:mode=preferred:nodes=0 start_s=1.5")
    # the VM's time budget follows the longest chain: 2 x 8 MiB / 4 of rmw, then 0.5 s + 2.5 s
    assert spec.program_duration_s(w) == pytest.approx(3.0 + (16 + 2 * 8 / 4) * spec.STREAM_S_PER_MIB)
    assert vm.expected_run_s({"workloads": [w]}) == 30.0


@pytest.mark.parametrize("edit, message", [
    (lambda w: w["buffers"].__setitem__(0, buf(64, "shared", "hugepage")), "private buffers only"),
    (lambda w: w["buffers"].__setitem__(0, buf(64, "file")), "numaw maps private, shared or shmem"),
    (lambda w: w["buffers"].clear(), "0 buffers: numaw runs 1 to 16"),
    (lambda w: w["buffers"].extend([buf(1)] * 16), "17 buffers"),
    (lambda w: w["processes"][0].update(parent=0), "process 0 is started, it has no parent"),
    (lambda w: w["processes"].append(proc(parent=3)), "parent 3: must be an earlier process"),
    (lambda w: w["processes"][0]["main"].append({"op": "mmap"}), "op 'mmap' has no real-kernel counterpart"),
    (lambda w: w["processes"][0]["main"].append(stream("load", passes=1, duration_s=1.0)), "one of them"),
    (lambda w: w["processes"][0]["threads"][0].update(count=4097), "4097 threads"),
    (lambda w: w["processes"][0]["threads"][0].update(cpus=[]), "non-empty list"),
])
def test_what_numaw_cannot_run_is_refused_with_where(edit, message):
    w = program([buf(64)], [proc(main=[stream("store", passes=1)], threads=[thread([stream("load", passes=1)])])])
    edit(w)
    with pytest.raises(RealKernelError, match=message) as e:
        line(w)
    assert e.value.loc.startswith("workload[0]")


def test_numaw_accepts_the_lines_spec_writes(numaw):
    env = dict(os.environ, NSW_CHECK_ARGS="1")  # parameters only: node 1 is not looked up
    for w in (READER_WRITER, program([buf(4, "shared")], [proc(), proc(parent=0, cpus=[0])])):
        p = subprocess.run([str(numaw), *line(w).split()], capture_output=True, text=True, env=env)
        assert p.returncode == 0 and "@nsw args ok kind=program n=3" in p.stdout, p.stdout


def run_spec(numaw, tmp_path, lines, *extra):
    s = tmp_path / "spec.txt"
    s.write_text("\n".join(lines) + "\n")
    p = subprocess.run([str(numaw), "run", str(s), "interval_ms=50", *extra], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return parse_console(p.stdout)


def test_a_forked_program_runs_here_and_each_process_reports(numaw, tmp_path):
    # process 0 first-touches a shmem buffer and its own private one, forks 1 (which forks 2);
    # every stream is counted in passes, so the totals are exact
    w = program([buf(2, "shmem"), buf(2), buf(1, "shared")], [
        proc(node=0, main=[stream("store", size_mib=2, passes=1), stream("store", buffer=1, size_mib=2, passes=2)],
             threads=[thread([stream("rmw", size_mib=2, passes=3)], count=2, cpus=[0])]),
        proc(parent=0, main=[{"op": "set_mempolicy", "mode": "bind", "nodes": [0]},
                             stream("store", buffer=1, size_mib=2, passes=1),
                             {"op": "set_mempolicy", "mode": "default", "nodes": []}],
             threads=[thread([{"op": "affinity", "node": 0, "cpus": None},
                              stream("load", size_mib=1, offset_mib=1, stride=2, passes=2),
                              {"op": "sleep", "duration_s": 0.3}])]),
        proc(parent=1, main=[stream("store", buffer=2, size_mib=1, passes=1)],
             threads=[thread([stream("load", buffer=2, size_mib=1, duration_s=0.2)], node=0)]),
    ])
    parsed = run_spec(numaw, tmp_path, [line(w)])
    assert parsed["exits"][0]["status"] == 0 and not parsed["errors"]
    done = {wl["process"]: wl for wl in parsed["workload_lines"] if wl.get("phase") == "done"}
    assert sorted(done) == [0, 1, 2] and len({wl["pid"] for wl in done.values()}) == 3
    assert (done[0]["passes"], done[0]["pages"], done[0]["threads"]) == (1 + 2 + 2 * 3, 512 * 3 + 2 * 3 * 512, 2)
    assert (done[1]["passes"], done[1]["pages"]) == (1 + 2, 512 + 2 * 128)  # stride 2 over 1 MiB: 128 pages
    assert done[2]["passes"] >= 2 and done[2]["threads"] == 1
    mains = [wl for wl in parsed["workload_lines"] if wl.get("phase") == "main"]
    assert sorted(wl["process"] for wl in mains) == [0, 1, 2]
    # the runner samples every process of the program, the grandchild included
    assert {pid for _t, _w, pid, _n in parsed["mem"]} >= {wl["pid"] for wl in done.values()}
    r = build_result(parsed, {"workloads": [w], "seed": 1}, {"kind": "host"})
    assert r.processes[0]["passes"] == sum(wl["passes"] for wl in done.values())


def test_a_private_buffer_is_each_processs_own(numaw, tmp_path):
    # both processes store all of buffer 0 and then wait: each maps its own 4 MiB after the fork
    # (no copy-on-write, no inherited copy), the shared buffer is one copy seen by both
    w = program([buf(4), buf(2, "shared")], [
        proc(main=[stream("store", size_mib=4, passes=1), stream("store", buffer=1, size_mib=2, passes=1)],
             threads=[thread([{"op": "sleep", "duration_s": 0.4}])]),
        proc(parent=0, main=[stream("store", size_mib=4, passes=1), {"op": "sleep", "duration_s": 0.4}]),
    ])
    parsed = run_spec(numaw, tmp_path, [line(w)], "mem_ms=100")
    assert parsed["exits"][0]["status"] == 0
    pids = {wl["process"]: wl["pid"] for wl in parsed["workload_lines"] if wl.get("phase") == "done"}
    last = {pid: sum(nodes) for _t, _w, pid, nodes in parsed["mem"]}
    overhead = 64  # the binary's data, heap and the main stack
    assert 1024 + 512 <= last[pids[0]] <= 1024 + 512 + overhead
    assert 1024 <= last[pids[1]] <= 1024 + overhead  # its own 4 MiB, and not the shared buffer it does not use


@pytest.mark.parametrize("args, message", [
    (["buffers=4", "processes=process/store:buffer=1:passes=1"], "process 0, main op 0 (store): buffer=1: there are 1"),
    (["buffers=4", "processes=process/store:offset_mib=2:size_mib=4"], "is outside buffer 0 (4 MiB)"),
    (["buffers=4", "processes=process/load:passes=1:duration_s=1"], "passes and duration_s are both given"),
    (["buffers=4", "processes=process/frob"], "unknown item frob"),
    (["buffers=4", "processes=process/thread:count=2:bogus=1/sleep:duration_s=0"], "thread 0: unknown key bogus"),
    (["buffers=4", "processes=process/process:parent=1"], "process 1: parent=1: must be an earlier process"),
    (["buffers=4:shmem:hugepage", "processes=process"], "madvise=hugepage needs mapping=private"),
    (["buffers=4", "processes=process/set_mempolicy:mode=preferred:nodes=0,1"], "preferred (one node)"),
    (["buffers=4", "processes=process:node=63"], "process 0: node 63 does not exist"),
    (["buffers=4", "processes=process/thread:cpus=0,1023/sleep:duration_s=0"], "cpu 1023 is not on any node"),
    (["buffers=4", "processes=process/process/set_mempolicy:mode=bind:nodes=63"], "node 63 does not exist"),
    (["buffers=4", "processes=thread"], "must start with a process item"),
    (["buffers=4"], "buffers= and processes= are required"),
    (["buffers=4", "processes=process", "passes=1"], "unknown parameter passes"),
])
def test_numaw_refuses_a_bad_program_before_it_starts(numaw, args, message):
    p = subprocess.run([str(numaw), "program", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and message in p.stdout, p.stdout
    assert "phase=" not in p.stdout  # refused before any process ran


def test_the_runner_reports_a_failed_program(numaw, tmp_path):
    s = tmp_path / "spec.txt"
    s.write_text("program buffers=4 processes=process/store:buffer=9:passes=1\n")
    p = subprocess.run([str(numaw), "run", str(s), "interval_ms=50"], capture_output=True, text=True, timeout=30)
    parsed = parse_console(p.stdout)
    assert parsed["exits"][0]["status"] == 2
    assert any("buffer=9: there are 1 buffers" in str(e) for e in parsed["errors"]), parsed["errors"]
