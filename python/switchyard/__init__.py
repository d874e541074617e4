"""Switchyard from Python: a cycle-level GPU simulator that runs real PTX.

Run a suite kernel timed on a GPU preset, load PTX, load or write scenarios (several
processes sharing one GPU under a scheduling policy and a preemption mechanism), run the
preemption study, and step a scenario run cycle by cycle. Results come back as pandas
DataFrames; the tables of a scenario are the CSVs ``switchyard scenario --csv`` writes.

>>> import switchyard as sy
>>> r = sy.run("reduce", gpu="gtx480")
>>> r.verified, r.cycles > 0
(True, True)

Errors are :mod:`switchyard.errors` exceptions whose messages are the command's (file,
line and field included).
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

import pandas as pd

from . import _native
from .errors import (
    PtxError,
    RunError,
    ScenarioError,
    SwitchyardError,
    SwitchyardValueError,
    SweepError,
)

__all__ = [
    "KernelRun",
    "PtxRun",
    "Module",
    "PtxError",
    "Result",
    "RunError",
    "Scenario",
    "ScenarioError",
    "Snapshot",
    "SteppedRun",
    "StudyResult",
    "SwitchyardError",
    "SwitchyardValueError",
    "load_ptx",
    "presets",
    "run",
    "run_ptx",
    "study",
    "sweep",
    "sweep_toml",
    "query",
    "export",
    "SweepError",
    "suite_kernels",
    "__version__",
]

__version__: str = _native.version()

PathLike = Union[str, "os.PathLike[str]"]


def presets() -> List[str]:
    """The names of the GPU presets (``gtx480``, ``a100``, ...)."""
    return list(_native.presets())


def suite_kernels() -> pd.DataFrame:
    """The suite's kernels: ``name``, ``default_target`` (its oldest committed PTX),
    ``targets`` and ``needs_tensor_cores``."""
    return pd.DataFrame(json.loads(_native.suite_kernels()))


def _flat(rows: List[Dict[str, Any]]) -> pd.DataFrame:
    """Rows of nested dictionaries as one flat DataFrame (``a.b`` columns); list-valued
    fields (per-SM vectors, occupancy traces) stay as Python lists in their cells."""
    if not rows:
        return pd.DataFrame()
    return pd.json_normalize(rows)


@dataclass
class Module:
    """A PTX module that loaded: its kernels and lowering's warnings."""

    file: str
    kernels: pd.DataFrame
    """One row a kernel: ``name``, ``demangled`` (its C++ name, or None), ``params``
    (a list of ``{name, type, offset, size}``), ``instructions``,
    ``static_shared_bytes``, ``local_bytes_per_thread``."""
    warnings: List[str]

    def params(self, kernel: str) -> pd.DataFrame:
        """Kernel ``kernel``'s parameters (by its mangled or demangled name)."""
        hit = self.kernels[(self.kernels.name == kernel) | (self.kernels.demangled == kernel)]
        if hit.empty:
            names = ", ".join(self.kernels.name)
            raise SwitchyardValueError(f"{self.file}: no kernel `{kernel}`; it has: {names}")
        return pd.DataFrame(hit.iloc[0].params)


def load_ptx(path: Optional[PathLike] = None, *, text: Optional[str] = None, name: str = "<string>.ptx") -> Module:
    """Loads PTX from the file ``path``, or from ``text`` (named ``name`` in messages),
    parsing, lowering and type-checking it as ``switchyard check`` does.

    Raises :class:`PtxError` with every diagnostic (file:line:col and the source line).
    """
    if (path is None) == (text is None):
        raise SwitchyardValueError("load_ptx: give either a path or text=")
    if path is not None:
        j = json.loads(_native.load_ptx(os.fspath(path)))
    else:
        j = json.loads(_native.load_ptx(name, text))
    return Module(file=j["file"], kernels=pd.DataFrame(j["kernels"]), warnings=j["warnings"])


@dataclass
class KernelRun:
    """One suite kernel's host program, run and verified (as ``switchyard run KERNEL``)."""

    kernel: str
    target: str
    size: str
    gpu: Optional[str]
    verified: bool
    detail: str
    launches: int
    warp_instructions: int
    thread_instructions: int
    cycles: Optional[int]
    """Simulated core cycles over all launches (None on the functional core)."""
    stats: pd.DataFrame
    """One row a timed launch: the counters ``run --stats`` writes, flattened."""


def run(
    kernel: str,
    gpu: str = "gtx480",
    *,
    size: str = "small",
    seed: int = 1,
    target: Optional[str] = None,
    timed: bool = True,
    scheduler: Optional[str] = None,
    max_cycles: Optional[int] = None,
    instruction_limit: Optional[int] = None,
) -> KernelRun:
    """Runs suite kernel ``kernel``'s host program on ``gpu`` (a preset name or a GPU
    ``.toml`` file) and verifies it against its CPU reference.

    ``target`` defaults to the kernel's oldest committed PTX; ``timed=False`` runs on the
    functional core only (no cycles); ``scheduler`` is ``lrr``, ``gto`` or ``two-level``.
    A result that does not verify is returned with ``verified`` False, not raised.
    """
    j = json.loads(
        _native.run_kernel(
            kernel, gpu, size, seed, target, timed, scheduler, max_cycles, instruction_limit
        )
    )
    return KernelRun(
        kernel=j["kernel"],
        target=j["target"],
        size=j["size"],
        gpu=j["gpu"],
        verified=j["verified"],
        detail=j["detail"],
        launches=j["launches"],
        warp_instructions=j["warp_instructions"],
        thread_instructions=j["thread_instructions"],
        cycles=j["cycles"],
        stats=_flat(j["stats"]),
    )


@dataclass
class PtxRun:
    """A PTX file run from its launch spec (as ``switchyard run FILE.ptx --spec``)."""

    file: str
    kernel: str
    """The kernels launched, comma-separated (``kernels`` as one label)."""
    kernels: List[str]
    """The kernels launched (PTX names), in the order of their first launch."""
    launches: int
    gpu: Optional[str]
    checked: bool
    """Whether the spec has checks (``[[process.check]]``); without them nothing is
    verified."""
    verified: bool
    checks: pd.DataFrame
    """One row a check: ``buffer``, ``checked``, ``mismatches``, ``first``."""
    warnings: List[str]
    warp_instructions: int
    thread_instructions: int
    cycles: Optional[int]
    """Simulated core cycles of every launch together (None on the functional core)."""
    stats: pd.DataFrame
    """The counters ``run --stats`` writes, flattened (one row a launch; empty on the
    functional core)."""
    dumps: List[str]
    """Where the spec's ``dump`` commands wrote their ``.npy`` files, and what each holds."""


def run_ptx(
    path: PathLike,
    spec: PathLike,
    gpu: str = "gtx480",
    *,
    timed: bool = True,
    scheduler: Optional[str] = None,
    max_cycles: Optional[int] = None,
    instruction_limit: Optional[int] = None,
) -> PtxRun:
    """Runs PTX file ``path`` from the launch spec ``spec`` on ``gpu`` (a preset name or a
    GPU ``.toml`` file), as ``switchyard run FILE.ptx --spec SPEC.toml`` does. The spec is
    a scenario of one process (its buffers, textures, commands and checks; see
    ``scenarios/README.md``), whose commands run one after another on the GPU alone.

    Raises :class:`PtxError` for PTX that does not load, :class:`ScenarioError` for a spec
    that does not parse or a launch it describes that the GPU refuses, and
    :class:`RunError` for a run that fails. A check that finds mismatches is returned with
    ``verified`` False, not raised.
    """
    j = json.loads(
        _native.run_ptx(
            os.fspath(path),
            os.fspath(spec),
            gpu,
            timed,
            scheduler,
            max_cycles,
            instruction_limit,
        )
    )
    return PtxRun(
        file=j["file"],
        kernel=j["kernel"],
        kernels=j["kernels"],
        launches=j["launches"],
        gpu=j["gpu"],
        checked=j["checked"],
        verified=j["verified"],
        checks=pd.DataFrame(j["checks"], columns=["buffer", "checked", "mismatches", "first"]),
        warnings=j["warnings"],
        warp_instructions=j["warp_instructions"],
        thread_instructions=j["thread_instructions"],
        cycles=j["cycles"],
        stats=_flat(j["stats"]),
        dumps=j["dumps"],
    )


def _csv(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text))


@dataclass
class Result:
    """A finished scenario run.

    The tables ``processes``, ``kernels``, ``copies``, ``requests``, ``preemption`` (per
    preempted kernel) and ``bandwidth`` (each launch's interconnect requests, DRAM bytes and
    interconnect flits per window of 1000 core cycles) are the CSVs of ``switchyard
    scenario --csv``;
    ``report`` is the ``--json`` report as a dictionary.
    """

    report: Dict[str, Any]
    processes: pd.DataFrame
    kernels: pd.DataFrame
    copies: pd.DataFrame
    requests: pd.DataFrame
    preemption: pd.DataFrame
    bandwidth: pd.DataFrame
    preemptions: pd.DataFrame
    """Every record of the preemption mechanism (``event``: requested, preempted,
    restored, ...; core cycles), flattened."""
    launch_stats: pd.DataFrame
    """One row a finished launch: ``process``, ``kernel``, ``launch`` and the counters
    ``scenario --stats`` writes (``stats.cycles``, ``stats.warp_instructions``, ...)."""
    residency: pd.DataFrame
    """Every TB arriving on or leaving an SM: ``cycle``, ``sm``, ``launch``, ``kernel``,
    ``tb``, ``how`` (dispatched, restored, finished, evicted, discarded)."""
    sm_samples: pd.DataFrame
    """Per-SM counters sampled every ``sample_every`` cycles of a stepped run (empty
    otherwise): ``cycle``, ``sm``, ``resident_tbs``, ``used_warps``, ``warp_instructions``,
    ``active_cycles``, ... (counters are cumulative)."""
    core_period_fs: int
    dumps: Dict[str, Any] = field(default_factory=dict)
    """Every ``dump`` command's buffer as a NumPy array, keyed ``"process/buffer"`` (the
    latest contents of a dump run again); nothing is written to disk."""

    @property
    def all_verified(self) -> bool:
        """Every process's results matched its checks."""
        return bool(self.report["all_verified"])

    @property
    def cycles(self) -> int:
        """Core cycles of the whole run."""
        return int(self.report["cycles"])

    @property
    def metrics(self) -> Optional[Dict[str, float]]:
        """ANTT, STP and fairness against each process alone (None without alone runs)."""
        return self.report["metrics"]

    def sm_occupancy(self) -> pd.DataFrame:
        """Resident TBs per SM over time, from :attr:`residency`: one row per change,
        ``cycle``, ``sm``, ``resident_tbs``."""
        if self.residency.empty:
            return pd.DataFrame(columns=["cycle", "sm", "resident_tbs"])
        arrive = self.residency.how.isin(["dispatched", "restored"])
        delta = arrive.astype(int) - (~arrive).astype(int)
        df = self.residency.assign(delta=delta)
        df = df.groupby(["sm", "cycle"], sort=True)["delta"].sum().groupby(level=0).cumsum()
        return df.rename("resident_tbs").reset_index()[["cycle", "sm", "resident_tbs"]]


def _result(finished: Any) -> Result:
    import numpy as np

    text, dumps = finished
    j = json.loads(text)
    csv = j["csv"]
    samples = []
    for s in j["sm_samples"]:
        for row in s["sms"]:
            samples.append({"cycle": s["cycle"], "sample_of": s["sample_of"], **row})
    return Result(
        report=j["report"],
        processes=_csv(csv["processes"]),
        kernels=_csv(csv["kernels"]),
        copies=_csv(csv["copies"]),
        requests=_csv(csv["requests"]),
        preemption=_csv(csv["preemption"]),
        bandwidth=_csv(csv["bandwidth"]),
        preemptions=_flat(j["preemptions"]),
        launch_stats=_flat(j["launch_stats"]),
        residency=pd.DataFrame(
            j["residency"], columns=["cycle", "sm", "launch", "kernel", "tb", "how"]
        ),
        sm_samples=pd.DataFrame(samples),
        core_period_fs=j["core_period_fs"],
        dumps={f"{p}/{b}": np.load(io.BytesIO(npy)) for (p, b, _file, npy) in dumps},
    )


@dataclass
class Snapshot:
    """A stepped run, paused: the machine's cycle and simulated time, every SM's counters
    so far (``sms``) and the launches on the machine (``launches``)."""

    cycle: int
    time_us: float
    sms: pd.DataFrame
    launches: pd.DataFrame


class SteppedRun:
    """A scenario run that can be paused and inspected (:meth:`Scenario.start`).

    ``run_until(c)`` steps the machine until the first cycle at or after ``c`` that it
    steps (stretches where the GPU idles between host events are jumped over) and returns
    a :class:`Snapshot`, or None when the run ended first; ``finish()`` runs to the end.
    Pausing does not change the run: the result equals :meth:`Scenario.run`'s.
    """

    def __init__(self, native: Any) -> None:
        self._native = native
        self._result: Optional[Result] = None

    def run_until(self, cycle: int) -> Optional[Snapshot]:
        """Steps to ``cycle``; the snapshot there, or None when the run ended first."""
        s = self._native.run_until(int(cycle))
        if s is None:
            return None
        j = json.loads(s)
        return Snapshot(
            cycle=j["cycle"],
            time_us=j["time_us"],
            sms=pd.DataFrame(j["sms"]),
            launches=pd.DataFrame(
                j["active_launches"],
                columns=["launch", "kernel", "tbs", "tbs_done", "tbs_resident", "warp_instructions"],
            ),
        )

    def finish(self) -> Result:
        """Runs to the end and returns the result (raises :class:`RunError` if it failed).
        A stepped run measures no alone runs, so its ``metrics`` are None."""
        if self._result is None:
            self._result = _result(self._native.finish())
        return self._result

    def close(self) -> None:
        """Stops the run where it is and frees its thread and machine (dropping the object
        does the same, without waiting). Afterwards ``run_until`` returns None and
        ``finish`` raises :class:`RunError`."""
        self._native.close()

    @property
    def done(self) -> bool:
        """Whether the run has ended."""
        return bool(self._native.done)

    @property
    def cycle(self) -> Optional[int]:
        """The cycle of the latest pause (None before the first)."""
        return self._native.cycle


class Scenario:
    """A scenario: processes (suite host programs or command lists over PTX) sharing one
    timed GPU. Loaded and checked at once: a mistake raises :class:`ScenarioError` naming
    the file, line and field, as ``switchyard scenario`` does."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def load(cls, path: PathLike) -> "Scenario":
        """Loads the scenario file ``path`` (relative paths in it are relative to it)."""
        return cls(_native.ScenarioHandle.load(os.fspath(path)))

    @classmethod
    def from_toml(cls, text: str, file: PathLike = "<string>.toml") -> "Scenario":
        """A scenario from TOML ``text``; ``file`` names it in messages, and its directory
        is where relative paths in it (PTX, GPU files, dumps) are found."""
        return cls(_native.ScenarioHandle.from_toml(text, os.fspath(file)))

    @property
    def file(self) -> str:
        return self._native.file

    @property
    def description(self) -> str:
        return self._native.description

    @property
    def processes(self) -> List[str]:
        """The processes' names, in order."""
        return list(self._native.processes)

    @property
    def warnings(self) -> List[str]:
        """What loading accepted but warns about (file:line:col: warning: what)."""
        return list(self._native.warnings)

    def run(
        self,
        *,
        gpu: Optional[str] = None,
        scheduler: Optional[str] = None,
        policy: Optional[str] = None,
        mechanism: Optional[str] = None,
        time_slice_us: Optional[float] = None,
        sharing: Optional[bool] = None,
        max_cycles: Optional[int] = None,
        instruction_limit: Optional[int] = None,
        alone: bool = True,
        threads: Optional[int] = None,
    ) -> Result:
        """Runs the scenario, with the overrides of ``switchyard scenario``: ``gpu`` (preset
        or file), ``scheduler``, ``policy`` and ``mechanism`` (``name[:key=value,...]``),
        ``time_slice_us``, ``sharing`` (intra-SM sharing), limits. With ``alone`` (the
        default) each process is also run alone for NTT, ANTT, STP and fairness.

        A run whose checks fail is returned (``all_verified`` False), not raised.
        """
        j = self._native.run(
            gpu, scheduler, policy, mechanism, time_slice_us, sharing, max_cycles,
            instruction_limit, alone, threads,
        )
        return _result(j)

    def start(
        self,
        *,
        gpu: Optional[str] = None,
        scheduler: Optional[str] = None,
        policy: Optional[str] = None,
        mechanism: Optional[str] = None,
        time_slice_us: Optional[float] = None,
        sharing: Optional[bool] = None,
        max_cycles: Optional[int] = None,
        instruction_limit: Optional[int] = None,
        sample_every: Optional[int] = None,
    ) -> SteppedRun:
        """Starts a run that can be stepped (see :class:`SteppedRun`), with the overrides
        of :meth:`run`. With ``sample_every``, every SM's counters are also sampled every
        that many cycles into the result's ``sm_samples``."""
        return SteppedRun(
            self._native.start(
                gpu, scheduler, policy, mechanism, time_slice_us, sharing, max_cycles,
                instruction_limit, sample_every,
            )
        )


@dataclass
class StudyResult:
    """The preemption study: ``rows`` has one row per mechanism (and the ``npq (no
    preemption)`` reference), with the high-priority wait and turnaround, the
    low-priority slowdown, whether every run verified and ended bit-exact, and the
    preemption summary flattened (``preemption.mean_latency_us``, ...)."""

    gpu: str
    low: str
    high: str
    high_arrival_us: float
    rows: pd.DataFrame
    raw: Dict[str, Any] = field(repr=False)

    @property
    def all_exact(self) -> bool:
        """Every run verified and every process's memory equals the reference's."""
        return bool((self.rows.verified & self.rows.bit_exact).all())


def study(
    *,
    gpu: str = "gtx480",
    low: str = "dgemv",
    low_size: str = "large",
    high: str = "gemm",
    arrival: float = 0.3,
    arrival_us: Optional[float] = None,
    mechanisms: Optional[str] = None,
    threads: Optional[int] = None,
    max_cycles: Optional[int] = None,
    instruction_limit: Optional[int] = None,
) -> StudyResult:
    """The preemption study (``switchyard study``): ``low`` holds the GPU; ``high``, of
    high priority, arrives ``arrival`` of the way into ``low``'s run (or at
    ``arrival_us``); every mechanism in ``mechanisms`` (a comma-separated list, default:
    all) takes the SMs it needs under preemptive priority."""
    j = json.loads(
        _native.study(
            gpu, low, low_size, high, arrival, arrival_us, mechanisms, threads, max_cycles,
            instruction_limit,
        )
    )
    return StudyResult(
        gpu=j["gpu"],
        low=j["low"],
        high=j["high"],
        high_arrival_us=j["high_arrival_us"],
        rows=_flat(j["rows"]),
        raw=j,
    )


# --- Sweeps -------------------------------------------------------------------------------


def _toml_value(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x, where) for x in v) + "]"
    if isinstance(v, dict):
        items = ", ".join(f"{json.dumps(str(k))} = {_toml_value(x, where)}" for k, x in v.items())
        return "{ " + items + " }"
    raise SwitchyardValueError(f"{where}: {type(v).__name__} {v!r}: a sweep value is a bool, number, string, list or table")


def _table(name: str, fields: Dict[str, Any]) -> str:
    lines = [name]
    for k, v in fields.items():
        lines.append(f"{json.dumps(str(k))} = {_toml_value(v, k)}")
    return "\n".join(lines) + "\n"


def sweep_toml(
    *,
    fixed: Optional[Dict[str, Any]] = None,
    grid: Optional[Dict[str, List[Any]]] = None,
    points: Optional[List[Dict[str, Any]]] = None,
    description: str = "",
    threads: Optional[int] = None,
) -> str:
    """The sweep file (``SWEEP.toml``) for these fields: what :func:`sweep` runs."""
    out = f"description = {json.dumps(description)}\n"
    if threads is not None:
        out += f"threads = {int(threads)}\n"
    if fixed:
        out += _table("[fixed]", fixed)
    if grid:
        out += _table("[grid]", grid)
    for p in points or []:
        out += _table("[[point]]", p)
    return out


def sweep(
    file: Optional[PathLike] = None,
    *,
    database: PathLike,
    fixed: Optional[Dict[str, Any]] = None,
    grid: Optional[Dict[str, List[Any]]] = None,
    points: Optional[List[Dict[str, Any]]] = None,
    description: str = "",
    threads: Optional[int] = None,
    jobs: Optional[int] = None,
    retry_failed: bool = False,
    backend: str = "local",
    ray_address: Optional[str] = None,
) -> pd.DataFrame:
    """Runs a sweep into the SQLite ``database`` (as ``switchyard sweep``) and returns its
    points' rows, one per point in the sweep's order, each field a column.

    The sweep is the file ``file`` or the fields given here: ``fixed`` (every point's
    fields), ``grid`` (every combination of these lists) and ``points`` (a list of points,
    each crossed with the grid); paths in them are taken from the file's folder, or from the
    current directory. A point the database already has is not run again, so calling this
    again after an interruption (or with more points) runs only what is missing. Failed
    points are rows with ``status == "failed"`` and their ``error``; ``retry_failed`` runs
    them again. ``jobs`` points run side by side (default: every core).

    ``backend="ray"`` runs the points as Ray tasks on the cluster at ``ray_address``
    (``"127.0.0.1:6379"``; ``None``: Ray's default, ``RAY_ADDRESS``, the cluster last
    started on this machine or a new local Ray), one task per point,
    Ray retrying a task whose worker died; this process records each result as it arrives,
    into the same database, with the same keys and rows as ``backend="local"`` (``jobs`` is
    then Ray's business: one CPU per task). Ray is an optional extra: ``pip install
    'switchyard[ray]'``; without it this raises ``SwitchyardValueError``.

    >>> df = sweep(database="s.db", grid={"kernel": ["reduce", "scan"], "seed": [1, 2]})
    >>> list(df.status)
    ['ok', 'ok', 'ok', 'ok']
    """
    if file is not None:
        if fixed or grid or points:
            raise SwitchyardValueError("give a sweep file or fixed/grid/points, not both")
        name, text = os.fspath(file), None
    else:
        name = "<sweep>"
        text = sweep_toml(fixed=fixed, grid=grid, points=points, description=description, threads=threads)
    if backend == "local":
        if ray_address is not None:
            raise SwitchyardValueError("ray_address is for backend='ray'")
        summary = json.loads(_native.sweep(name, os.fspath(database), text, jobs, retry_failed))
    elif backend == "ray":
        if jobs is not None:
            raise SwitchyardValueError("jobs is for backend='local' (Ray runs one task per CPU)")
        from . import _ray

        summary = _ray.sweep(
            name, os.fspath(database), text, address=ray_address, retry_failed=retry_failed
        )
    else:
        raise SwitchyardValueError(f"backend {backend!r}: write 'local' or 'ray'")
    rows = query(database)
    by_key = rows.drop_duplicates("key").set_index("key")
    df = by_key.reindex(summary["keys"]).reset_index()
    df["point"] = range(len(df))
    df.attrs["summary"] = {k: v for k, v in summary.items() if k != "keys"}
    return df


def query(database: PathLike, sql: Optional[str] = None) -> pd.DataFrame:
    """The rows of a results database as a DataFrame: ``sql``, or every point of the
    ``results`` view (the fields of the last sweep as columns). The database is an ordinary
    SQLite file: ``pd.read_sql(sql, sqlite3.connect(path))`` reads it as well."""
    import sqlite3

    path = os.fspath(database)
    if not os.path.isfile(path):
        raise SwitchyardValueError(f"{path}: no such results database")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return pd.read_sql(sql or "SELECT * FROM results ORDER BY sweep, point", con)
    finally:
        con.close()


def export(database: PathLike, path: PathLike, sql: Optional[str] = None) -> pd.DataFrame:
    """Writes the rows of :func:`query` to ``path``: CSV for ``.csv``, Parquet for
    ``.parquet`` (through pandas, with pyarrow or fastparquet; the command ``switchyard
    query`` writes CSV only). Returns the rows."""
    df = query(database, sql)
    out = os.fspath(path)
    if out.endswith(".csv"):
        df.to_csv(out, index=False)
    elif out.endswith(".parquet"):
        try:
            df.to_parquet(out, index=False)
        except ImportError as e:
            raise SwitchyardValueError(f"{out}: Parquet needs pyarrow or fastparquet ({e})") from e
    else:
        raise SwitchyardValueError(f"{out}: write .csv or .parquet")
    return df
