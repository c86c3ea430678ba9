#!/usr/bin/env python3
"""Mutation fuzzer of the trace analysis, through the command-line tools.

Each case is one seed number: it picks a real trace from the shared folder
(read-only; mutated copies go to a temporary directory), mutates it
(trace_mutations.py), runs the native ``gpuutil-analyze`` on it (and, for a
sample of cases, ``gpuutil analyze --json``), and checks the contract:

- no crash: no death by a signal, no sanitizer report on stderr;
- no hang: each run ends within ``--timeout`` seconds;
- exit code 0 or 2; on 2, stdout is empty and stderr is exactly one line
  starting ``gpuutil-analyze: error:`` (``gpuutil: error:``);
- on 0, stderr is empty and stdout is one line of strict JSON (no NaN,
  valid UTF-8) satisfying the report's identities (report_identities.py:
  ``check_report`` plus the accounting identities of every step, device and
  host thread, and the run totals against the steps);
- the Python command gives the same exit code, and on 0 the same bytes.

A breach is saved with its input(s) under ``OUT/breaches/seed-N/`` (the
first five of each kind: its message with the numbers taken out; the
summary counts every kind) and replays with ``--replay N``. Cases are numbered from ``--seed``; the same
number always gives the same input. ``OUT/state.json`` records the next
case and the tallies after each progress line, so ``--resume`` continues an
interrupted run. Progress (cases/s, breaches) is printed every 10 s.

  .venv/bin/python tests/fuzz/mutate_traces.py --minutes 10 --out /tmp/fuzz
  .venv/bin/python tests/fuzz/mutate_traces.py --out /tmp/fuzz --resume --minutes 5
  .venv/bin/python tests/fuzz/mutate_traces.py --replay 1234 --out /tmp/fuzz

Exit code: 0 when no case breached the contract, 1 otherwise, 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_identities import check_identities, diagnostics_registry  # noqa: E402
from trace_mutations import Seed, make_mutant  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SANITIZER_MARKS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "LeakSanitizer", "ThreadSanitizer",
                   "MemorySanitizer", "runtime error:")
SAVED_PER_SIGNATURE = 5  # breaches saved and printed per kind of breach (its message without numbers)
MEMORY_LIMIT_BYTES = 8 << 30  # a runaway case fails inside the tool instead of taking the machine


def default_traces_dir() -> Path:
    env = os.environ.get("GPUUTIL_TRACES_DIR")
    return Path(env) if env else REPO.parent / "shared" / "traces"


def default_cli() -> Path:
    for p in (REPO / "build" / "gpuutil-analyze", REPO / ".venv" / "bin" / "gpuutil-analyze"):
        if p.exists():
            return p
    return Path(shutil.which("gpuutil-analyze") or "gpuutil-analyze")


def default_python_cli() -> Optional[Path]:
    p = REPO / ".venv" / "bin" / "gpuutil"
    return p if p.exists() else (Path(shutil.which("gpuutil")) if shutil.which("gpuutil") else None)


@dataclass
class Run:
    argv: List[str]
    rc: Optional[int]  # None: timed out
    stdout: bytes
    stderr: bytes
    wall_s: float


@dataclass
class Breach:
    kind: str  # "crash", "hang" or "contract"
    tool: str
    message: str
    run: Run


@dataclass
class CaseResult:
    seed: int
    trace: str
    mutations: List[str]
    runs: List[Run] = field(default_factory=list)
    breaches: List[Breach] = field(default_factory=list)
    inputs: List[Tuple[str, bytes]] = field(default_factory=list)
    stdin: bool = False


def _limit_child(memory_limit: bool) -> None:
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_tool(argv: List[str], stdin_data: Optional[bytes], timeout_s: float, memory_limit: bool = True) -> Run:
    for attempt in range(5):  # a tool being reinstalled by someone else cannot start for a moment
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    preexec_fn=lambda: _limit_child(memory_limit))
            break
        except OSError:
            if attempt == 4:
                raise
            time.sleep(2)
    try:
        out, err = proc.communicate(stdin_data, timeout=timeout_s)
        rc: Optional[int] = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    return Run(argv, rc, out, err, time.monotonic() - t0)


def check_run(run: Run, prefix: str, sources: int, registry: List[Tuple[str, str]]) -> Optional[Tuple[str, str]]:
    """(kind, message) of the first breach of the contract, or None."""
    if run.rc is None:
        return "hang", f"no exit within the timeout ({run.wall_s:.1f} s)"
    stderr = run.stderr.decode("utf-8", "replace")
    if run.rc < 0:
        last = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
        return "crash", (f"killed by signal {-run.rc} ({signal.Signals(-run.rc).name})" +
                         (f"; stderr: {last}" if last else ""))
    if any(mark in stderr for mark in SANITIZER_MARKS):
        return "crash", "sanitizer report: " + stderr.strip().splitlines()[0][:300]
    if run.rc not in (0, 2):
        return "contract", f"exit code {run.rc}: {stderr.strip()[:300]!r}"
    if run.rc == 2:
        if run.stdout:
            return "contract", f"exit 2 with {len(run.stdout)} bytes on stdout"
        lines = stderr.split("\n")
        if not (len(lines) == 2 and lines[1] == "" and lines[0].startswith(prefix)):
            return "contract", f"exit 2 without exactly one {prefix!r} line on stderr: {stderr[:300]!r}"
        return None
    if run.stderr:
        return "contract", f"exit 0 with stderr: {stderr[:300]!r}"
    try:
        text = run.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        return "contract", f"stdout is not UTF-8: {e}"
    if not text.endswith("\n") or "\n" in text[:-1]:
        return "contract", "stdout is not one line"

    def no_constant(name: str) -> Any:
        raise ValueError(f"non-JSON constant {name}")

    try:
        report = json.loads(text, parse_constant=no_constant)
    except ValueError as e:
        return "contract", f"stdout is not strict JSON: {e}"
    if not isinstance(report, dict):
        return "contract", "the report is not a JSON object"
    try:
        check_identities(report, sources=sources, registry=registry)
    except ValueError as e:
        return "contract", f"identity: {e}"
    except (KeyError, TypeError) as e:
        return "contract", f"identity check could not read the report: {type(e).__name__} {e}"
    return None


class Fuzzer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.python_cli = str(args.python_cli) if args.python_cli else None
        self.registry = diagnostics_registry()
        paths = sorted(p for p in Path(args.traces).iterdir() if p.name.endswith((".json", ".json.gz")))
        if args.only:
            paths = [p for p in paths if any(o in p.name for o in args.only)]
        if not paths:
            raise SystemExit(f"mutate_traces: error: no traces in {args.traces}")
        self.paths = paths
        self.seeds = [Seed.load(p) for p in paths]
        self.out = Path(args.out)
        self.tmp = Path(tempfile.mkdtemp(prefix="gpuutil-fuzz-"))
        # A copy of the native tool: a rebuild of build/ during the run changes nothing here.
        self.cli_path = str(args.cli)
        binary = Path(args.cli).read_bytes()
        self.cli_sha256 = hashlib.sha256(binary).hexdigest()
        # AddressSanitizer reserves terabytes of address space: no RLIMIT_AS for it.
        self.memory_limit = b"__asan_init" not in binary
        self.cli = str(self.tmp / "gpuutil-analyze")
        shutil.copy2(args.cli, self.cli)

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def corpus(self) -> List[str]:
        return [f"{p.name}:{p.stat().st_size}" for p in self.paths]

    def case(self, seed: int) -> CaseResult:
        rng = random.Random(f"case-options-{seed}")  # independent of the mutation stream
        base, mutant = make_mutant(self.seeds, seed)
        result = CaseResult(seed, base.name, mutant.mutations)
        workdir = self.tmp / f"seed-{seed}"
        workdir.mkdir()
        try:
            files: List[Tuple[str, bytes]] = [(f"input{mutant.suffix}", mutant.data)]
            if rng.random() < self.args.multi_share:  # a two-rank job: the mutant and a clean trace
                other = rng.choice(self.paths)
                files.append((f"rank1-{other.name}", other.read_bytes()))
                result.mutations.append(f"with second input {other.name}")
            result.inputs = files
            for name, data in files:
                (workdir / name).write_bytes(data)
            args = [str(workdir / name) for name, _ in files]
            stdin_data = None
            if len(files) == 1 and rng.random() < self.args.stdin_share:
                args, stdin_data = ["-"], mutant.data
                result.stdin = True
                result.mutations.append("read from standard input")
            options: List[str] = []
            if rng.random() < self.args.options_share:  # MFU inputs at their extremes (valid values only)
                if rng.random() < 0.7:
                    options += ["--flops-per-step", rng.choice(["1", "1e9", "1e15", "1e300", "1.7e308"])]
                if rng.random() < 0.5:
                    options += ["--peak-tflops", rng.choice(["1e-300", "0.001", "1", "1000", "1e300"])]
                if rng.random() < 0.5:
                    options += ["--dtype", rng.choice(["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"])]
                result.mutations.append("options " + " ".join(options))
            tools = [("gpuutil-analyze", [self.cli] + options + args, "gpuutil-analyze: error:")]
            if self.python_cli and rng.random() < self.args.python_share:
                tools.append(("gpuutil", [self.python_cli, "analyze", "--json"] + options + args, "gpuutil: error:"))
            for tool, argv, prefix in tools:
                run = run_tool(argv, stdin_data, self.args.timeout, self.memory_limit or tool != "gpuutil-analyze")
                result.runs.append(run)
                breach = check_run(run, prefix, len(files), self.registry)
                if breach:
                    result.breaches.append(Breach(breach[0], tool, breach[1], run))
            if len(result.runs) == 2 and not result.breaches:
                native, py = result.runs
                if native.rc != py.rc:
                    result.breaches.append(
                        Breach("contract", "gpuutil", f"exit code {py.rc}, gpuutil-analyze's {native.rc}", py))
                elif native.rc == 0 and native.stdout != py.stdout:
                    result.breaches.append(Breach("contract", "gpuutil", "report differs from gpuutil-analyze's", py))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return result

    def save(self, result: CaseResult) -> Path:
        where = self.out / "breaches" / f"seed-{result.seed}"
        where.mkdir(parents=True, exist_ok=True)
        for name, data in result.inputs:
            (where / name).write_bytes(data)
        record = {
            "seed": result.seed, "trace": result.trace, "mutations": result.mutations, "stdin": result.stdin,
            "replay": f"{sys.executable} {Path(__file__).resolve()} --replay {result.seed} --out {self.out}",
            "breaches": [{"kind": b.kind, "tool": b.tool, "message": b.message,
                          "argv": [self.cli_path if a == self.cli else a for a in b.run.argv], "rc": b.run.rc,
                          "wall_s": round(b.run.wall_s, 3), "stderr": b.run.stderr.decode("utf-8", "replace")[-4000:]}
                         for b in result.breaches],
        }
        (where / "case.json").write_text(json.dumps(record, indent=1) + "\n")
        for i, b in enumerate(result.breaches):
            if b.run.stdout:
                (where / f"stdout-{i}.json").write_bytes(b.run.stdout[:64 << 20])
        return where


class Tally:
    KEYS = ("cases", "exit0", "exit2", "python_runs", "stdin_cases", "multi_cases", "crashes", "hangs",
            "contract_breaches", "breach_cases", "elapsed_s")

    def __init__(self, saved: Optional[Dict[str, Any]] = None) -> None:
        self.v: Dict[str, Any] = {k: 0 for k in self.KEYS}
        self.v["elapsed_s"] = 0.0
        self.breach_seeds: List[int] = []
        # Breaches grouped by their message with the numbers taken out: {signature: [cases, first seed]}.
        self.signatures: Dict[str, List[int]] = {}
        if saved:
            for k in self.KEYS:
                self.v[k] = saved.get(k, self.v[k])
            self.breach_seeds = list(saved.get("breach_seeds", []))
            self.signatures = dict(saved.get("signatures", {}))

    def add(self, r: CaseResult) -> bool:
        """Counts the case; True when one of its breaches is among the first
        SAVED_PER_SIGNATURE of its kind (worth saving and printing)."""
        v = self.v
        new = False
        v["cases"] += 1
        native = r.runs[0] if r.runs else None
        if native is not None and native.rc == 0:
            v["exit0"] += 1
        elif native is not None and native.rc == 2:
            v["exit2"] += 1
        v["python_runs"] += len(r.runs) - 1
        v["stdin_cases"] += r.stdin
        v["multi_cases"] += len(r.inputs) > 1
        for b in r.breaches:
            v[{"crash": "crashes", "hang": "hangs"}.get(b.kind, "contract_breaches")] += 1
            sig = f"{b.kind} {b.tool}: " + re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", b.message)[:160]
            entry = self.signatures.setdefault(sig, [0, r.seed])
            entry[0] += 1
            new = new or entry[0] <= SAVED_PER_SIGNATURE
        if r.breaches:
            v["breach_cases"] += 1
            if len(self.breach_seeds) < 1000:
                self.breach_seeds.append(r.seed)
        return new


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mutate_traces", description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", type=Path, default=default_traces_dir(), help="folder of real traces (read-only)")
    p.add_argument("--only", action="append", help="use only traces whose name contains this (repeatable)")
    p.add_argument("--cli", type=Path, default=default_cli(),
                   help="gpuutil-analyze to test (default: build/, else .venv/bin/)")
    p.add_argument("--python-cli", type=Path, default=default_python_cli(),
                   help="gpuutil console script (default: .venv/bin/gpuutil)")
    p.add_argument("--python-share", type=float, default=0.05,
                   help="share of cases also run through `gpuutil analyze --json`")
    p.add_argument("--stdin-share", type=float, default=0.05,
                   help="share of single-input cases read from standard input")
    p.add_argument("--multi-share", type=float, default=0.05,
                   help="share of cases given a second (clean) trace as rank 1")
    p.add_argument("--options-share", type=float, default=0.1,
                   help="share of cases given --flops-per-step/--peak-tflops/--dtype")
    p.add_argument("--seed", type=int, default=0, help="first case number")
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds one tool run may take (a hang beyond)")
    p.add_argument("--jobs", type=int, default=1, help="cases run at once")
    p.add_argument("--out", type=Path, default=Path("fuzz-out"),
                   help="folder for state.json, summary.json and breaches/")
    p.add_argument("--resume", action="store_true", help="continue from OUT/state.json")
    p.add_argument("--replay", type=int, default=None, metavar="SEED", help="run one case, print it, save its input")
    p.add_argument("--progress-s", type=float, default=10.0, help="seconds between progress lines")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs and --timeout must be positive")
    if args.replay is None and args.cases is None and args.minutes is None:
        p.error("give --cases N or --minutes N (or --replay SEED)")
    return args


def replay(fz: Fuzzer, seed: int) -> int:
    r = fz.case(seed)
    print(f"seed {seed}: {r.trace}")
    for m in r.mutations:
        print(f"  {m}")
    for run in r.runs:
        tool = fz.cli_path if run.argv[0] == fz.cli else run.argv[0]
        print(f"  {tool}: rc {run.rc}, {run.wall_s:.2f} s, stderr {run.stderr[:200]!r}")
    where = fz.save(r)
    for b in r.breaches:
        print(f"  BREACH ({b.kind}, {b.tool}): {b.message}")
    print(f"  input saved in {where}")
    return 1 if r.breaches else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    fz = Fuzzer(args)
    try:
        if args.replay is not None:
            return replay(fz, args.replay)
        return fuzz(fz, args)
    finally:
        fz.close()


def fuzz(fz: Fuzzer, args: argparse.Namespace) -> int:
    out = fz.out
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "state.json"
    saved: Optional[Dict[str, Any]] = None
    next_seed = args.seed
    if args.resume and state_path.exists():
        saved = json.loads(state_path.read_text())
        if saved.get("corpus") != fz.corpus():
            raise SystemExit("mutate_traces: error: the traces differ from the run being resumed")
        next_seed = saved["next_seed"]
    tally = Tally(saved)
    first_seed = saved["first_seed"] if saved else next_seed
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes is not None else None
    limit = args.cases
    done_now = 0
    elapsed_before = tally.v["elapsed_s"]
    last_progress = start
    last_count = 0

    def write_state() -> None:
        state = {"first_seed": first_seed, "next_seed": next_seed, "corpus": fz.corpus(), "cli": fz.cli_path,
                 "cli_sha256": fz.cli_sha256,
                 **tally.v, "breach_seeds": tally.breach_seeds, "signatures": tally.signatures}
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        tmp.replace(state_path)

    def progress(final: bool = False) -> None:
        nonlocal last_progress, last_count
        now = time.monotonic()
        v = tally.v
        rate_now = (done_now - last_count) / max(now - last_progress, 1e-9)
        rate = done_now / max(now - start, 1e-9)
        if not args.quiet or final:
            now_text = "" if final else f"{rate_now:.1f}/s now, "
            print(f"[{now - start:7.1f} s] cases {v['cases']} (seeds {first_seed}..{next_seed - 1}), "
                  f"{now_text}{rate:.1f}/s overall; exit 0: {v['exit0']}, exit 2: {v['exit2']}; "
                  f"crashes {v['crashes']}, hangs {v['hangs']}, contract breaches {v['contract_breaches']}",
                  flush=True)
        last_progress, last_count = now, done_now
        write_state()

    pending: Deque[Tuple[int, Future]] = deque()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        seed_to_submit = next_seed

        def more() -> bool:
            return ((deadline is None or time.monotonic() < deadline) and
                    (limit is None or seed_to_submit - run_first_seed < limit))

        run_first_seed = next_seed
        while True:
            while more() and len(pending) < 2 * args.jobs:
                pending.append((seed_to_submit, pool.submit(fz.case, seed_to_submit)))
                seed_to_submit += 1
            if not pending:
                break
            seed, fut = pending.popleft()
            r = fut.result()
            worth_saving = tally.add(r)
            done_now += 1
            next_seed = seed + 1
            tally.v["elapsed_s"] = round(elapsed_before + time.monotonic() - start, 1)
            if worth_saving:
                where = fz.save(r)
                for b in r.breaches:
                    print(f"BREACH seed {r.seed} ({b.kind}, {b.tool}): {b.message}\n  {r.trace}: "
                          f"{'; '.join(r.mutations[1:])}\n  saved in {where}", flush=True)
            if time.monotonic() - last_progress >= args.progress_s:
                progress()
    progress(final=True)
    v = tally.v
    summary = {**v, "first_seed": first_seed, "next_seed": next_seed, "cli": fz.cli_path, "cli_sha256": fz.cli_sha256,
               "cases_per_s": round(v["cases"] / max(v["elapsed_s"], 1e-9), 2), "breach_seeds": tally.breach_seeds,
               "signatures": tally.signatures}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({**summary, "breach_seeds": summary["breach_seeds"][:20]}))
    return 1 if v["breach_cases"] else 0


if __name__ == "__main__":
    sys.exit(main())
