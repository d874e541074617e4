//! A single-SM test harness of the timing model ([`crate::timing`]) in the style of Ramulator 2's controller tests (shared/STYLE.md):
//! one SM over a memory that completes every access a fixed number of cycles after it was
//! offered ([`FixedLatency`]), so that cycle gaps do not depend on the memory model. A test
//! places TBs, makes requests of the control protocol, steps or runs until idle, and asserts
//! the acknowledgements and the cycles between them.
//!
//! Requests made between steps take effect at the current cycle, before its issue stage (in
//! a run, a control makes them after the issue stage of the cycle before; a TB placed either
//! way issues no earlier than its instruction fetch allows).

use std::sync::Arc;

use crate::config::GpuConfig;
use crate::host::{DeviceLimits, KernelArg, LoadedModule};
use crate::memory::DeviceMemory;
use crate::timing::backend::FixedLatency;
use crate::timing::control::{Refused, Request, Ticket};
use crate::timing::ids::{LaunchId, SmId, TbRef};
use crate::timing::machine::{Event, Idle, Machine};
use crate::timing::{TimedGpu, TimingError};

/// The SM every harness runs on.
pub const SM: SmId = SmId(0);

/// One SM of a GPU with a fixed-latency memory, a module of kernels, and launches of them
/// (the first made from the spec).
pub struct SmHarness {
    machine: Machine<FixedLatency>,
    module: LoadedModule,
    timing: TimedGpu,
    launch: LaunchId,
    /// Every event so far, in order.
    log: Vec<Event>,
}

/// What a harness is built from.
pub struct HarnessSpec<'a> {
    /// The GPU whose SM (the first) is tested; its other SMs are dropped.
    pub gpu: GpuConfig,
    pub ptx: &'a str,
    pub kernel: &'a str,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub args: Vec<KernelArg>,
    /// Core cycles from an access's offer to its completion.
    pub latency: u64,
    /// Device memory the arguments point into.
    pub memory: DeviceMemory,
}

impl SmHarness {
    /// Loads the kernel, builds its launch and submits it (its TBs wait to be dispatched).
    pub fn new(spec: HarnessSpec) -> Result<SmHarness, String> {
        let HarnessSpec {
            mut gpu,
            ptx,
            kernel,
            grid,
            block,
            args,
            latency,
            mut memory,
        } = spec;
        gpu.sm.count = 1;
        let module =
            LoadedModule::load(&mut memory, "harness.ptx", ptx).map_err(|e| e.to_string())?;
        let timing = TimedGpu::new(gpu);
        let period = Machine::memory_config_of(&timing.gpu)
            .clocks
            .period_fs(memsys::Domain::Core);
        let backend = FixedLatency::new(1, latency, period);
        let machine =
            Machine::with_backend(timing.gpu.clone(), timing.options.clone(), memory, backend);
        let mut h = SmHarness {
            machine,
            module,
            timing,
            launch: LaunchId(0),
            log: Vec::new(),
        };
        h.launch = h.submit(kernel, grid, block, &args)?;
        Ok(h)
    }

    /// Submits another launch, of a kernel of the same module; its TBs wait to be
    /// dispatched.
    pub fn submit(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &[KernelArg],
    ) -> Result<LaunchId, String> {
        let kid = self.module.kernel(kernel).map_err(|e| e.to_string())?;
        let ctx = self
            .module
            .launch_ctx(&DeviceLimits::default(), kid, grid, block, 0, args, 0)
            .map_err(|e| e.to_string())?;
        let timed = self.timing.timed_kernel(&Arc::clone(&ctx.kernel));
        self.machine.submit(ctx, &timed).map_err(|e| e.to_string())
    }

    pub fn machine(&self) -> &Machine<FixedLatency> {
        &self.machine
    }

    pub fn machine_mut(&mut self) -> &mut Machine<FixedLatency> {
        &mut self.machine
    }

    /// The first launch.
    pub fn launch(&self) -> LaunchId {
        self.launch
    }

    /// The current core cycle.
    pub fn cycle(&self) -> u64 {
        self.machine.cycle()
    }

    /// Makes a request (its immediate acknowledgements go to the log at once).
    pub fn request(&mut self, request: Request) -> Result<Ticket, Refused> {
        let r = self.machine.request(request);
        self.log.extend(self.machine.take_events());
        r
    }

    /// Dispatches the first launch's next TB onto the SM.
    pub fn dispatch(&mut self) -> Result<TbRef, Refused> {
        self.dispatch_of(self.launch)
    }

    /// Dispatches `launch`'s next TB onto the SM.
    pub fn dispatch_of(&mut self, launch: LaunchId) -> Result<TbRef, Refused> {
        Ok(self
            .request(Request::Dispatch { sm: SM, launch })?
            .tb()
            .expect("a dispatch names its TB"))
    }

    /// Runs one core cycle.
    pub fn step(&mut self) -> Result<(), TimingError> {
        self.machine.step(&mut Idle)?;
        self.log.extend(self.machine.take_events());
        Ok(())
    }

    /// Steps until an event matching `f` is logged after this call, at most `limit`
    /// cycles; the event's index in the log.
    pub fn run_until(
        &mut self,
        limit: u64,
        f: impl FnMut(&Event) -> bool,
    ) -> Result<usize, TimingError> {
        let from = self.log.len();
        self.run_until_since(from, limit, f)
    }

    /// Steps until an event matching `f` is in the log at index `from` or later (it may
    /// already be), at most `limit` cycles; the event's index in the log.
    pub fn run_until_since(
        &mut self,
        from: usize,
        limit: u64,
        mut f: impl FnMut(&Event) -> bool,
    ) -> Result<usize, TimingError> {
        for _ in 0..=limit {
            if let Some(i) = self.log[from..].iter().position(&mut f) {
                return Ok(from + i);
            }
            self.step()?;
        }
        Err(TimingError::Mechanism(format!(
            "no matching event within {limit} cycles"
        )))
    }

    /// Steps until nothing is resident and nothing is in flight, at most `limit` cycles.
    pub fn run_until_idle(&mut self, limit: u64) -> Result<(), TimingError> {
        for _ in 0..limit {
            if self.machine.is_idle() {
                return Ok(());
            }
            self.step()?;
        }
        Err(TimingError::Mechanism(format!(
            "not idle within {limit} cycles"
        )))
    }

    /// Every event so far.
    pub fn log(&self) -> &[Event] {
        &self.log
    }

    /// The cycle of the first event after index `from` matching `f`.
    pub fn cycle_of(&self, from: usize, f: impl Fn(&Event) -> bool) -> Option<u64> {
        self.log[from..].iter().find(|e| f(e)).map(Event::cycle)
    }
}
