#!/usr/bin/env python3
"""Device server for `switchyard hardware`: runs the suite's host programs on a real GPU.

`switchyard hardware` drives this process through its stdin and stdout. Every message is
one JSON line, followed by a raw payload when the line names one (`len`):

    -> {"op": "load", "name": "gemm", "len": N}  + N bytes of PTX   <- {"ok": true}
    -> {"op": "alloc", "bytes": N}                                 <- {"ptr": ADDRESS}
    -> {"op": "write", "ptr": A, "len": N}  + N bytes             <- {"ok": true}
    -> {"op": "read", "ptr": A, "len": N}                          <- {"ok": true, "len": N} + N bytes
    -> {"op": "launch", "entry": E, "grid": [x, y, z], "block": [x, y, z], "smem": S,
        "args": [{"t": "ptr" | "u32" | "i32" | "u64" | "f32" | "f64", "v": BITS}, ...]}
                                                                    <- {"ms": [...], "sm_clock_mhz": F}
    -> {"op": "reset"}   (frees every allocation)                  <- {"ok": true}

Any failure answers {"error": "..."}; a CUDA error leaves the context unusable, so the
server exits after reporting one. The first line the server writes describes the GPU.

How a launch is timed: before it, every live allocation is copied aside; then, `--reps`
times, the allocations are restored, the L2 is flushed by writing a buffer twice its size,
and the launch alone is timed with CUDA events. Each repetition therefore starts from the
same memory contents and a cold L2, as a simulated launch does, and the memory left behind
is that of one launch, so the host program verifies exactly what one launch computed.

`--fake` serves host memory without a GPU and launches nothing: the protocol's own test.
Needs CuPy (and, for the SM clock, nvidia-ml-py); the GPU machines' image has both.
"""

import argparse
import json
import sys

ALIGN = 256


class FakeGpu:
    """Host memory only; a launch does nothing and takes no time."""

    def __init__(self):
        self.memory = {}
        self.next = 0x10000

    def describe(self):
        return {"device": "fake (no GPU)", "sms": 0, "l2_bytes": 0, "max_sm_clock_mhz": 0.0}

    def load(self, name, ptx):
        if b".entry" not in ptx:
            raise ValueError(f"module {name} has no .entry")

    def alloc(self, n):
        ptr = self.next
        self.memory[ptr] = bytearray(n)
        self.next += (max(n, 1) + ALIGN - 1) // ALIGN * ALIGN
        return ptr

    def _find(self, ptr, n):
        for base, buf in self.memory.items():
            if base <= ptr and ptr + n <= base + len(buf):
                return buf, ptr - base
        raise ValueError(f"access of {n} bytes at {ptr:#x} is outside every allocation")

    def write(self, ptr, data):
        buf, off = self._find(ptr, len(data))
        buf[off:off + len(data)] = data

    def read(self, ptr, n):
        buf, off = self._find(ptr, n)
        return bytes(buf[off:off + n])

    def launch(self, entry, grid, block, smem, args, reps):
        return [0.0] * reps, 0.0

    def reset(self):
        self.memory.clear()


class CudaGpu:
    def __init__(self):
        import cupy as cp
        import numpy as np

        self.cp, self.np = cp, np
        self.rt = cp.cuda.runtime
        props = self.rt.getDeviceProperties(0)
        self.props = props
        self.modules = {}
        self.functions = {}
        self.allocations = {}  # ptr -> MemoryPointer
        self.backups = {}  # ptr -> MemoryPointer of the same size
        l2 = int(props.get("l2CacheSize", 64 << 20))
        self.flush = cp.cuda.alloc(max(2 * l2, 64 << 20))
        self.flush_bytes = max(2 * l2, 64 << 20)
        self.nvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:  # noqa: BLE001 - the clock is optional
            self.nvml = None

    def sm_clock(self, maximum=False):
        if self.nvml is None:
            return 0.0
        pynvml, handle = self.nvml
        if maximum:
            return float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))

    def describe(self):
        name = self.props["name"]
        if isinstance(name, bytes):
            name = name.decode()
        return {
            "device": name,
            "sms": int(self.props["multiProcessorCount"]),
            "l2_bytes": int(self.props.get("l2CacheSize", 0)),
            "max_sm_clock_mhz": self.sm_clock(maximum=True),
            "driver": int(self.rt.driverGetVersion()),
        }

    def load(self, name, ptx):
        module = self.cp.cuda.function.Module()
        module.load(ptx + b"\0")
        self.modules[name] = module
        self.functions.clear()
        self.current = module

    def alloc(self, n):
        mem = self.cp.cuda.alloc(max(n, 1))
        self.rt.memset(mem.ptr, 0, max(n, 1))
        self.allocations[mem.ptr] = (mem, n)
        return int(mem.ptr)

    def write(self, ptr, data):
        host = self.np.frombuffer(data, dtype=self.np.uint8)
        self.rt.memcpy(ptr, host.ctypes.data, len(data), self.rt.memcpyHostToDevice)

    def read(self, ptr, n):
        host = self.np.empty(n, dtype=self.np.uint8)
        self.rt.memcpy(host.ctypes.data, ptr, n, self.rt.memcpyDeviceToHost)
        return host.tobytes()

    def _arg(self, a):
        np = self.np
        t, v = a["t"], int(a["v"])
        if t in ("ptr", "u64"):
            return np.uint64(v)
        if t == "u32":
            return np.uint32(v)
        if t == "i32":
            return np.array([v & 0xFFFFFFFF], dtype=np.uint32).view(np.int32)[0]
        if t == "f32":
            return np.array([v], dtype=np.uint32).view(np.float32)[0]
        if t == "f64":
            return np.array([v], dtype=np.uint64).view(np.float64)[0]
        raise ValueError(f"unknown argument type {t}")

    def _copy_all(self, to_backup):
        for ptr, (mem, n) in self.allocations.items():
            if n == 0:
                continue
            if ptr not in self.backups:
                self.backups[ptr] = self.cp.cuda.alloc(n)
            backup = self.backups[ptr].ptr
            src, dst = (ptr, backup) if to_backup else (backup, ptr)
            self.rt.memcpyAsync(dst, src, n, self.rt.memcpyDeviceToDevice, 0)

    def launch(self, entry, grid, block, smem, args, reps):
        cp = self.cp
        fn = self.functions.get(entry)
        if fn is None:
            fn = self.current.get_function(entry)
            if smem > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = smem
            self.functions[entry] = fn
        values = tuple(self._arg(a) for a in args)
        self._copy_all(to_backup=True)
        times = []
        clock = 0.0
        for _ in range(reps):
            self._copy_all(to_backup=False)
            self.rt.memsetAsync(self.flush.ptr, len(times) & 0xFF, self.flush_bytes, 0)
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn(tuple(grid), tuple(block), values, shared_mem=smem)
            end.record()
            end.synchronize()
            clock = max(clock, self.sm_clock())
            times.append(float(cp.cuda.get_elapsed_time(start, end)))
        self.rt.deviceSynchronize()
        return times, clock

    def reset(self):
        self.allocations.clear()
        self.backups.clear()
        self.functions.clear()
        self.cp.get_default_memory_pool().free_all_blocks()


def read_exact(stream, n):
    data = stream.read(n)
    if data is None or len(data) != n:
        raise EOFError("switchyard closed the connection mid-message")
    return data


def serve(gpu, reps):
    inp, out = sys.stdin.buffer, sys.stdout.buffer

    def send(obj, payload=b""):
        out.write(json.dumps(obj).encode() + b"\n")
        if payload:
            out.write(payload)
        out.flush()

    send(gpu.describe())
    while True:
        line = inp.readline()
        if not line:
            return 0
        fatal = False
        try:
            msg = json.loads(line)
            op = msg["op"]
            if op == "load":
                gpu.load(msg["name"], read_exact(inp, msg["len"]))
                send({"ok": True})
            elif op == "alloc":
                send({"ptr": gpu.alloc(int(msg["bytes"]))})
            elif op == "write":
                gpu.write(int(msg["ptr"]), read_exact(inp, msg["len"]))
                send({"ok": True})
            elif op == "read":
                data = gpu.read(int(msg["ptr"]), int(msg["len"]))
                send({"ok": True, "len": len(data)}, data)
            elif op == "launch":
                fatal = True  # a failed launch poisons the CUDA context
                times, clock = gpu.launch(
                    msg["entry"], msg["grid"], msg["block"], int(msg.get("smem", 0)),
                    msg["args"], reps,
                )
                fatal = False
                send({"ms": times, "sm_clock_mhz": clock})
            elif op == "reset":
                gpu.reset()
                send({"ok": True})
            else:
                send({"error": f"unknown op {op!r}"})
        except EOFError as e:
            print(f"cuda_device: {e}", file=sys.stderr)
            return 1
        except Exception as e:  # noqa: BLE001 - every failure goes back to switchyard
            send({"error": f"{type(e).__name__}: {e}"})
            if fatal:
                return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fake", action="store_true", help="host memory, no GPU (protocol tests)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per launch")
    a = p.parse_args()
    if a.reps < 1:
        p.error("--reps must be at least 1")
    if a.fake:
        gpu = FakeGpu()
    else:
        try:
            gpu = CudaGpu()
        except ImportError as e:
            print(f"cuda_device: {e}: this server needs CuPy and an NVIDIA GPU "
                  "(pip install cupy-cuda12x or cupy-cuda13x)", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001 - no device, no driver
            print(f"cuda_device: no usable GPU: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    return serve(gpu, a.reps)


if __name__ == "__main__":
    sys.exit(main())
