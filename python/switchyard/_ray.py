"""The Ray backend of :func:`switchyard.sweep` (``backend="ray"``) and of ``switchyard sweep
--ray ADDRESS``: a sweep's points run as Ray tasks on an existing Ray cluster, their results
gathered into the same SQLite database as a local sweep's.

The driver (this process) holds the database: it starts the sweep (``_native.sweep_start``:
a new run, every point's key, the points to run), submits one task per point to run, and
records each result as it arrives, in its own transaction. A task runs
:func:`run_point` on a worker: the sweep's text, its folder and the point's number go out;
the point's key and outcome (JSON) come back, and the driver checks the key against its own
(a worker with other files or another Switchyard version records the point as failed, saying
so). Ray retries a task whose worker died (``max_retries``); recording is idempotent on the
key, so a result delivered twice still leaves one row.

Ray is an optional extra (``pip install ./python[ray]``); it is imported only here, and only
when a Ray sweep runs. The workers need the same ``switchyard`` package (this module is how
they find :func:`run_point`) and, for scenario sweeps, the sweep's files at the same paths.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import _native
from .errors import RunError, SwitchyardError, SwitchyardValueError

#: Attempts Ray makes again for a task whose worker process or node died.
MAX_RETRIES = 3


def run_point(file: str, text: str, folder: str, index: int) -> str:
    """One point of a sweep, run where Ray placed it: JSON ``{"key", "outcome"}``."""
    return _native.sweep_point(file, text, folder, index)


def _import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415 - optional, imported only for a Ray sweep
    except ImportError as e:
        raise SwitchyardValueError(
            "backend='ray' needs Ray, an optional extra of the switchyard package: "
            f"pip install 'switchyard[ray]' (from a checkout: pip install './python[ray]') ({e})"
        ) from e
    return ray


def sweep(
    file: str,
    database: str,
    text: Optional[str] = None,
    address: Optional[str] = None,
    retry_failed: bool = False,
    max_retries: int = MAX_RETRIES,
) -> Dict[str, Any]:
    """Runs the sweep ``file`` (or ``text`` named ``file``) into ``database`` on the Ray
    cluster at ``address`` (``None``: Ray's own choice: ``RAY_ADDRESS``, the cluster last
    started on this machine, or a new local instance; a Ray already initialised in this
    process is used as it is). Returns the
    summary (as ``_native.sweep``'s). Points whose task failed even after ``max_retries``
    are left unrecorded, so running the sweep again runs them; they raise ``RunError`` once
    every other point is recorded."""
    ray = _import_ray()
    driver = _native.sweep_start(file, database, text, retry_failed)
    pending: List[Dict[str, Any]] = json.loads(driver.pending())
    lost: List[Tuple[int, str]] = []
    if pending:
        ours = not ray.is_initialized()
        if ours:
            try:
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError
                raise RunError(f"could not connect to the Ray cluster at {address!r}: {e}") from e
        try:
            task = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(run_point)
            text_ref = ray.put(driver.text)
            waiting = {
                task.remote(file, text_ref, driver.dir, p["index"]): p["index"] for p in pending
            }
            while waiting:
                done, _ = ray.wait(list(waiting), num_returns=1)
                for ref in done:
                    index = waiting.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        lost.append((index, str(e).splitlines()[0] if str(e) else repr(e)))
                        continue
                    driver.record(index, result)
        finally:
            if ours:
                ray.shutdown()
    summary: Dict[str, Any] = json.loads(driver.summary())
    if lost:
        listed = "; ".join(f"point {i}: {why}" for i, why in lost[:5])
        raise RunError(
            f"{len(lost)} of {len(pending)} points could not run on Ray even after "
            f"{max_retries} retries ({listed}); they are not recorded: run the sweep again"
        )
    return summary


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m switchyard._ray SWEEP.toml --db DB --address ADDRESS``: what
    ``switchyard sweep --ray ADDRESS`` runs. Prints the summary as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m switchyard._ray")
    parser.add_argument("file")
    parser.add_argument("--db", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--retry-failed", action="store_true")
    args = parser.parse_args(argv)
    try:
        summary = sweep(args.file, args.db, address=args.address, retry_failed=args.retry_failed)
    except SwitchyardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary.pop("keys", None)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    # Run as `python -m`, this file is `__main__`; the tasks must name the importable module.
    from switchyard._ray import main as _main

    sys.exit(_main())
