//! `suite::Size::Huge` fills the big presets: every suite kernel's first launch has at least
//! two full waves of TBs on the h100, with TBs per SM from the occupancy calculator exactly as
//! the timed machine computes it (registers from allocating the kernel's PTX, shared memory
//! from its layout). Nothing is simulated: the host program is stopped at its first launch,
//! before any CPU reference runs.

use gpu::config::GpuConfig;
use gpu::host::{DeviceLimits, KernelArg, LoadedModule};
use gpu::memory::DeviceMemory;
use gpu::timing::TimedGpu;
use gpu::{DevPtr as GpuPtr, Gpu};
use suite::{Arg, DevPtr, Device, DeviceError, Dim3, Launch, Size};

/// A launch as the host program asked for it.
struct Recorded {
    entry: String,
    grid: Dim3,
    block: Dim3,
    dynamic_smem: u32,
    args: Vec<Arg>,
}

/// The message [`FirstLaunch`] stops the host program with.
const STOP: &str = "stopped at the first launch";

/// A device that hands out addresses, keeps no data and stops the host program at its first
/// launch, which it records. Host programs read nothing back before their first launch.
#[derive(Default)]
struct FirstLaunch {
    next: u64,
    launch: Option<Recorded>,
}

impl Device for FirstLaunch {
    fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
        self.next += bytes.div_ceil(256) * 256 + 256;
        Ok(DevPtr(self.next - bytes.div_ceil(256) * 256))
    }

    fn write(&mut self, _: DevPtr, _: &[u8]) -> Result<(), DeviceError> {
        Ok(())
    }

    fn read(&mut self, _: DevPtr, _: u64) -> Result<Vec<u8>, DeviceError> {
        Err(DeviceError("read before the first launch".into()))
    }

    fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
        self.launch = Some(Recorded {
            entry: l.entry.to_string(),
            grid: l.grid,
            block: l.block,
            dynamic_smem: l.dynamic_smem,
            args: l.args.to_vec(),
        });
        Err(DeviceError(STOP.into()))
    }
}

fn kernel_arg(a: &Arg) -> KernelArg {
    match *a {
        Arg::Ptr(p) => KernelArg::Ptr(GpuPtr(p.0)),
        Arg::U32(v) => KernelArg::U32(v),
        Arg::I32(v) => KernelArg::I32(v),
        Arg::U64(v) => KernelArg::U64(v),
        Arg::F32(v) => KernelArg::F32(v),
        Arg::F64(v) => KernelArg::F64(v),
    }
}

#[test]
fn huge_first_launches_fill_the_h100_twice() {
    let timing = TimedGpu::new(GpuConfig::preset("h100").unwrap());
    let sms = timing.gpu.sm.count;
    assert_eq!(sms, 132);
    let device = Gpu::timed(timing.clone()).unwrap();
    let machine = device.machine().expect("a timed device");
    let limits = DeviceLimits::default();
    let mut short = Vec::new();
    for k in suite::all() {
        let mut dev = FirstLaunch::default();
        match k.run(&mut dev, Size::Huge, 1) {
            Err(DeviceError(e)) if e == STOP => {}
            other => panic!("{}: the host program did not launch: {other:?}", k.name()),
        }
        let l = dev.launch.expect("recorded");
        let args: Vec<KernelArg> = l.args.iter().map(kernel_arg).collect();
        let tbs = l.grid.count();
        // The kernel must fill the GPU twice on every target it is compiled for.
        for &(target, ptx) in k.sources() {
            let file = format!("{}.{}.ptx", k.name(), target.name());
            let mut module = LoadedModule::load(&mut DeviceMemory::new(), &file, ptx)
                .unwrap_or_else(|e| panic!("{file}: {e:?}"));
            let kid = module.kernel(&l.entry).unwrap();
            let ctx = module
                .launch_ctx(
                    &limits,
                    kid,
                    [l.grid.x, l.grid.y, l.grid.z],
                    [l.block.x, l.block.y, l.block.z],
                    l.dynamic_smem,
                    &args,
                    1,
                )
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let timed = module.timed_kernel(kid, &timing);
            let (_, occupancy, regs) = machine
                .occupancy(&ctx, &timed)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let want = 2 * sms as u64 * occupancy.tbs_per_sm as u64;
            eprintln!(
                "{file}: {tbs} TBs, {} TBs/SM ({regs} registers, limited by {:?}): {:.2} waves",
                occupancy.tbs_per_sm,
                occupancy.limited_by,
                tbs as f64 / (sms as u64 * occupancy.tbs_per_sm as u64) as f64
            );
            if tbs < want {
                short.push(format!("{file}: {tbs} TBs, want at least {want}"));
            }
        }
    }
    assert!(short.is_empty(), "{}", short.join("\n"));
}
