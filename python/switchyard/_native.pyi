"""Type stubs of the native extension (`python/src/lib.rs`). Functions return JSON text
that `switchyard/__init__.py` turns into dictionaries and DataFrames; use that module."""

from typing import List, Optional, Tuple

# A finished scenario run: its JSON, and every dump as (process, buffer, file, .npy bytes).
_Finished = Tuple[str, List[Tuple[str, str, str, bytes]]]

def version() -> str: ...
def presets() -> List[str]: ...
def suite_kernels() -> str: ...
def load_ptx(file: str, text: Optional[str] = None) -> str: ...
def run_kernel(
    name: str,
    gpu: str = "gtx480",
    size: str = "small",
    seed: int = 1,
    target: Optional[str] = None,
    timed: bool = True,
    scheduler: Optional[str] = None,
    max_cycles: Optional[int] = None,
    instruction_limit: Optional[int] = None,
) -> str: ...
def run_ptx(
    path: str,
    spec: str,
    gpu: str = "gtx480",
    timed: bool = True,
    scheduler: Optional[str] = None,
    max_cycles: Optional[int] = None,
    instruction_limit: Optional[int] = None,
) -> str: ...
def study(
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
) -> str: ...

def sweep(
    file: str,
    db: str,
    text: Optional[str] = None,
    jobs: Optional[int] = None,
    retry_failed: bool = False,
) -> str: ...

class SweepDriver:
    """A sweep started on its database for a foreign executor (the Ray backend)."""
    @property
    def text(self) -> str: ...
    @property
    def dir(self) -> str: ...
    def pending(self) -> str: ...
    def record(self, index: int, result: str) -> bool: ...
    def summary(self) -> str: ...

def sweep_start(
    file: str, db: str, text: Optional[str] = None, retry_failed: bool = False
) -> SweepDriver: ...
def sweep_point(file: str, text: str, dir: str, index: int) -> str: ...

class ScenarioHandle:
    @staticmethod
    def load(path: str) -> "ScenarioHandle": ...
    @staticmethod
    def from_toml(text: str, file: str) -> "ScenarioHandle": ...
    @property
    def file(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def processes(self) -> List[str]: ...
    def run(
        self,
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
    ) -> _Finished: ...
    def start(
        self,
        gpu: Optional[str] = None,
        scheduler: Optional[str] = None,
        policy: Optional[str] = None,
        mechanism: Optional[str] = None,
        time_slice_us: Optional[float] = None,
        sharing: Optional[bool] = None,
        max_cycles: Optional[int] = None,
        instruction_limit: Optional[int] = None,
        sample_every: Optional[int] = None,
    ) -> "Run": ...

class Run:
    def run_until(self, cycle: int) -> Optional[str]: ...
    def finish(self) -> _Finished: ...
    def close(self) -> None: ...
    @property
    def done(self) -> bool: ...
    @property
    def cycle(self) -> Optional[int]: ...
