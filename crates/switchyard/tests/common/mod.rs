//! Shared by tests that run suite host programs on the timed machine under a control of
//! their own: a `suite::Device` whose every launch runs with the control `make` builds for
//! it, and a snapshot of every allocation the host program made, for bit-exact comparisons.

#![allow(dead_code)]

use std::sync::Arc;

use gpu::config::GpuConfig;
use gpu::timing::{
    Control, KernelPass, LaunchId, Machine, Pass, Request, SmId, TbControl, TbRef, TimedGpu,
    TimingError,
};
use gpu::{DevPtr, Gpu, KernelArg, ModuleId};

/// A suite device on the timed machine; `make(launch, entry, cycle)` builds each launch's
/// control (the launch, its kernel's entry name and the cycle it starts).
pub struct TimedDevice<M> {
    pub gpu: Gpu,
    pub module: ModuleId,
    /// Allocations the host program made: (base, size), in order.
    pub allocs: Vec<(u64, u64)>,
    pub make: M,
}

impl<M> TimedDevice<M> {
    /// Kernel `k`'s default PTX loaded on a timed device of `preset` (the A100 for kernels
    /// that need tensor cores), its kernels rewritten by `pass` if one is given.
    pub fn new(k: &dyn suite::Kernel, pass: Option<Arc<dyn KernelPass>>, make: M) -> Self {
        let preset = if k.needs_tensor_cores() {
            "a100"
        } else {
            "gtx480"
        };
        let mut timing = TimedGpu::new(GpuConfig::preset(preset).unwrap());
        timing.options.pass = pass.map(Pass);
        let mut gpu = Gpu::timed(timing).unwrap();
        let target = k.default_target();
        let module = gpu
            .load_ptx(
                &format!("{}.{}.ptx", k.name(), target.name()),
                k.ptx(target).expect("committed PTX"),
            )
            .unwrap();
        TimedDevice {
            gpu,
            module,
            allocs: Vec::new(),
            make,
        }
    }

    /// Every allocation's bytes, in allocation order.
    pub fn snapshot(&self) -> Vec<Vec<u8>> {
        self.allocs
            .iter()
            .map(|&(p, n)| self.gpu.copy_from_device(DevPtr(p), n).unwrap())
            .collect()
    }
}

impl<M, C> suite::Device for TimedDevice<M>
where
    M: FnMut(LaunchId, &str, u64) -> C,
    C: Control,
{
    fn alloc(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        let p = self.gpu.alloc(bytes).0;
        self.allocs.push((p, bytes));
        Ok(suite::DevPtr(p))
    }

    fn write(&mut self, dst: suite::DevPtr, data: &[u8]) -> Result<(), suite::DeviceError> {
        self.gpu
            .copy_to_device(DevPtr(dst.0), data)
            .map_err(|e| suite::DeviceError(e.to_string()))
    }

    fn read(&mut self, src: suite::DevPtr, len: u64) -> Result<Vec<u8>, suite::DeviceError> {
        self.gpu
            .copy_from_device(DevPtr(src.0), len)
            .map_err(|e| suite::DeviceError(e.to_string()))
    }

    fn launch(&mut self, l: &suite::Launch<'_>) -> Result<(), suite::DeviceError> {
        let args: Vec<KernelArg> = l
            .args
            .iter()
            .map(|a| match *a {
                suite::Arg::Ptr(p) => KernelArg::Ptr(DevPtr(p.0)),
                suite::Arg::U32(v) => KernelArg::U32(v),
                suite::Arg::I32(v) => KernelArg::I32(v),
                suite::Arg::U64(v) => KernelArg::U64(v),
                suite::Arg::F32(v) => KernelArg::F32(v),
                suite::Arg::F64(v) => KernelArg::F64(v),
            })
            .collect();
        let start = self.gpu.machine().expect("timed").cycle();
        let make = &mut self.make;
        let entry = l.entry;
        self.gpu
            .launch_timed_with(
                self.module,
                l.entry,
                [l.grid.x, l.grid.y, l.grid.z],
                [l.block.x, l.block.y, l.block.z],
                l.dynamic_smem,
                &args,
                |launch| make(launch, entry, start),
            )
            .map_err(|e| suite::DeviceError(e.to_string()))?;
        Ok(())
    }
}

/// Dispatches every new TB of `launch` that fits, SM by SM (what `GridDriver` does).
pub fn dispatch_new(m: &mut Machine, launch: LaunchId) -> Result<(), TimingError> {
    for sm in m.sm_ids() {
        if m.launch(launch).undispatched() > 0 && m.fits(sm, launch) {
            m.request(Request::Dispatch { sm, launch })?;
        }
    }
    Ok(())
}

/// The running TBs (of `launch`, or of any launch), SM by SM.
pub fn running_tbs(m: &Machine, launch: Option<LaunchId>) -> Vec<(SmId, TbRef)> {
    m.sm_ids()
        .flat_map(|sm| {
            m.resident(sm)
                .filter(|&(tb, c)| c == TbControl::Running && launch.is_none_or(|l| l == tb.launch))
                .map(move |(tb, _)| (sm, tb))
                .collect::<Vec<_>>()
        })
        .collect()
}
