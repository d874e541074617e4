//! Context-save traffic is real memory traffic: a memory-bound kernel runs on some SMs while
//! the others stream context saves ([`gpu::timing::Request::Transfer`]) at a fixed rate. The saves cross
//! the interconnect at context priority, one packet per line (the saved lines then reach
//! DRAM as the L2's ordinary write-backs), and the more bytes they move the longer the
//! co-running kernel takes.

use gpu::config::GpuConfig;
use gpu::timing::{Control, Direction, LaunchId, Machine, Request, SmId, TimedGpu, TimingError};
use gpu::{DevPtr, Gpu, KernelArg, ModuleId};
use suite::{Size, Target};

/// SMs that save contexts instead of running the kernel.
const SAVERS: u32 = 6;
/// A memory-bound co-runner.
const KERNEL: &str = "dgemv";
/// The context area the saves cycle through: larger than the L2, so that saved lines are
/// written back to DRAM as they would be when many TBs are switched out.
const AREA: u64 = 8 << 20;

/// Runs the launch on SMs `SAVERS`.. while each of SMs 0..`SAVERS` saves `bytes` every
/// `period` cycles, each save to the next stretch of the area.
struct Interfere {
    launch: LaunchId,
    bytes: u64,
    period: u64,
    next: u64,
    area: u64,
    offset: u64,
}

impl Control for Interfere {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for sm in m.sm_ids().skip(SAVERS as usize) {
            if m.launch(self.launch).undispatched() > 0 && m.fits(sm, self.launch) {
                m.request(Request::Dispatch {
                    sm,
                    launch: self.launch,
                })?;
            }
        }
        if self.bytes > 0 && m.cycle() >= self.next {
            self.next += self.period;
            for sm in 0..SAVERS {
                if self.offset + self.bytes > AREA {
                    self.offset = 0;
                }
                let now = m.cycle();
                m.request(Request::Transfer {
                    sm: SmId(sm),
                    direction: Direction::Save,
                    base: self.area + self.offset,
                    bytes: self.bytes,
                    launch: self.launch,
                    not_before: now,
                })?;
                self.offset += self.bytes;
            }
        }
        Ok(())
    }
}

struct Dev {
    gpu: Gpu,
    module: ModuleId,
    bytes: u64,
    area: u64,
    cycles: u64,
}

impl suite::Device for Dev {
    fn alloc(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        Ok(suite::DevPtr(self.gpu.alloc(bytes).0))
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
        let (bytes, area) = (self.bytes, self.area);
        let start = self.gpu.machine().expect("timed").cycle();
        let stats = self
            .gpu
            .launch_timed_with(
                self.module,
                l.entry,
                [l.grid.x, l.grid.y, l.grid.z],
                [l.block.x, l.block.y, l.block.z],
                l.dynamic_smem,
                &args,
                |launch| Interfere {
                    launch,
                    bytes,
                    period: 2_000,
                    next: start,
                    area,
                    offset: 0,
                },
            )
            .map_err(|e| suite::DeviceError(e.to_string()))?;
        self.cycles += stats.cycles;
        Ok(())
    }
}

/// The kernel's cycles and the interconnect packets at context priority, with `bytes` saved
/// every 2,000 cycles on each saving SM.
fn run(bytes: u64) -> (u64, u64) {
    let k = suite::by_name(KERNEL).expect("suite kernel");
    let mut gpu = Gpu::timed(TimedGpu::new(GpuConfig::preset("gtx480").unwrap())).unwrap();
    let module = gpu
        .load_ptx(&format!("{KERNEL}.sm_70.ptx"), k.ptx(Target::Sm70).unwrap())
        .unwrap();
    let area = gpu.alloc(AREA).0;
    let mut d = Dev {
        gpu,
        module,
        bytes,
        area,
        cycles: 0,
    };
    let v = k.run(&mut d, Size::Small, 1).unwrap();
    assert!(v.passed(), "{v:?}");
    let mem = d.gpu.machine().unwrap().memory_stats();
    (d.cycles, mem.icnt_request.context_packets)
}

#[test]
fn context_saves_load_the_memory_system_and_slow_the_kernels_beside_them() {
    let (quiet, none) = run(0);
    assert_eq!(none, 0, "no context traffic without saves");
    let (light, light_packets) = run(8 << 10);
    let (heavy, heavy_packets) = run(40 << 10);
    // Five times the bytes, about five times the packets (a save still queued when the
    // kernel ends does not count).
    assert!(
        light_packets > 0,
        "saves cross the interconnect at context priority"
    );
    assert!(
        heavy_packets > 4 * light_packets,
        "{light_packets} vs {heavy_packets}"
    );
    // More context bytes, a slower co-runner.
    assert!(quiet < light && light < heavy, "{quiet} {light} {heavy}");
    assert!(
        heavy as f64 > 1.03 * quiet as f64,
        "saving 40 KB per SM every 2,000 cycles should cost the kernel over 3%: {quiet} → {heavy}"
    );
}
