//! Shared by the `timing_*` tests: a device (the host API, [`gpu::Gpu`]) that runs every
//! launch on either the functional core or the timed GPU, over the same kind of device memory.

#![allow(dead_code)]

use gpu::config::GpuConfig;
use gpu::timing::{TimedGpu, TimedStats};
use gpu::{DevPtr, Gpu, KernelArg, ModuleId};

/// Which engine runs a launch.
#[derive(Clone, Debug)]
pub enum Engine {
    Functional,
    Timed(Box<TimedGpu>),
}

impl Engine {
    /// The timed GTX480 (`configs/gtx480.toml`).
    pub fn gtx480() -> Engine {
        Engine::Timed(Box::new(TimedGpu::new(
            GpuConfig::preset("gtx480").unwrap(),
        )))
    }

    /// The timed GTX480, or the A100 for a kernel that needs tensor cores (the GTX480 has
    /// none).
    pub fn for_kernel(k: &dyn suite::Kernel) -> Engine {
        let preset = if k.needs_tensor_cores() {
            "a100"
        } else {
            "gtx480"
        };
        Engine::Timed(Box::new(TimedGpu::new(GpuConfig::preset(preset).unwrap())))
    }

    /// The timed GTX480 running the PTX as written, without register allocation: for
    /// microbenchmarks whose independent instructions write values nothing reads, which the
    /// allocator would give one register (serialising them through its write-after-write
    /// hazard where `ptxas` would delete them).
    pub fn gtx480_unallocated() -> Engine {
        let mut t = TimedGpu::new(GpuConfig::preset("gtx480").unwrap());
        t.options.allocate = false;
        Engine::Timed(Box::new(t))
    }
}

/// A loaded module on its own device.
pub struct Device {
    pub gpu: Gpu,
    pub module: ModuleId,
    pub engine: Engine,
    /// Allocations made through `alloc`: (base, size).
    pub allocs: Vec<(u64, u64)>,
    pub stats: Vec<TimedStats>,
}

impl Device {
    pub fn new(file: &str, ptx_text: &str, engine: Engine) -> Device {
        let mut gpu = match &engine {
            Engine::Functional => Gpu::new(),
            Engine::Timed(t) => Gpu::timed((**t).clone()).unwrap_or_else(|e| panic!("{e}")),
        };
        let module = gpu
            .load_ptx(file, ptx_text)
            .unwrap_or_else(|e| panic!("{e}"));
        Device {
            gpu,
            module,
            engine,
            allocs: Vec::new(),
            stats: Vec::new(),
        }
    }

    pub fn alloc(&mut self, bytes: u64) -> u64 {
        let p = self.gpu.alloc(bytes).0;
        self.allocs.push((p, bytes));
        p
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) {
        self.gpu.copy_to_device(DevPtr(addr), data).unwrap();
    }

    pub fn read(&self, addr: u64, len: u64) -> Vec<u8> {
        self.gpu.copy_from_device(DevPtr(addr), len).unwrap()
    }

    /// Every allocation's bytes, in allocation order.
    pub fn snapshot(&self) -> Vec<Vec<u8>> {
        self.allocs.iter().map(|&(p, n)| self.read(p, n)).collect()
    }

    /// Launches `entry`; `args` are the raw bytes of each parameter in order. Returns the
    /// timed statistics (None on the functional engine).
    pub fn launch(
        &mut self,
        entry: &str,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: &[Vec<u8>],
    ) -> Result<Option<TimedStats>, String> {
        let args: Vec<KernelArg> = args.iter().map(|a| KernelArg::Bytes(a.clone())).collect();
        match &self.engine {
            Engine::Functional => {
                self.gpu
                    .launch(self.module, entry, grid, block, dynamic_smem, &args)
                    .map_err(|e| e.to_string())?;
                Ok(None)
            }
            Engine::Timed(_) => {
                let s = self
                    .gpu
                    .launch_timed(
                        self.module,
                        entry,
                        grid,
                        block,
                        dynamic_smem,
                        &args,
                        &mut |_| {},
                    )
                    .map_err(|e| e.to_string())?;
                self.stats.push(s.clone());
                Ok(Some(s))
            }
        }
    }
}

/// A `suite::Device` over [`Device`].
impl suite::Device for Device {
    fn alloc(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        Ok(suite::DevPtr(Device::alloc(self, bytes)))
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
        let args: Vec<Vec<u8>> = l
            .args
            .iter()
            .map(|a| match *a {
                suite::Arg::Ptr(p) => p.0.to_le_bytes().to_vec(),
                suite::Arg::U32(v) => v.to_le_bytes().to_vec(),
                suite::Arg::I32(v) => v.to_le_bytes().to_vec(),
                suite::Arg::U64(v) => v.to_le_bytes().to_vec(),
                suite::Arg::F32(v) => v.to_le_bytes().to_vec(),
                suite::Arg::F64(v) => v.to_le_bytes().to_vec(),
            })
            .collect();
        Device::launch(
            self,
            l.entry,
            [l.grid.x, l.grid.y, l.grid.z],
            [l.block.x, l.block.y, l.block.z],
            l.dynamic_smem,
            &args,
        )
        .map(|_| ())
        .map_err(suite::DeviceError)
    }
}

/// Wraps a kernel body: `k(.param .u64 out, .param .u64 aux, .param .u32 n)` with
/// `%rd0` = out (global), `%rd1` = aux (global), `%r0` = n, `%r1` = %tid.x, `%r2` = global
/// thread index.
pub fn kernel(decls: &str, body: &str) -> String {
    format!(
        r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 aux, .param .u32 n)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<64>;
    .reg .b64 %rd<32>;
    .reg .f32 %f<64>;
{decls}
    ld.param.u64 %rd0, [out];
    cvta.to.global.u64 %rd0, %rd0;
    ld.param.u64 %rd1, [aux];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r0, [n];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r2, %r3, %r4, %r1;
{body}
    ret;
}}
"#
    )
}

pub fn u64_arg(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

pub fn u32_arg(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

/// Runs the wrapped kernel on `engine` with `out` and `aux` buffers; returns the stats and
/// the final `out` contents.
pub fn run_kernel(
    engine: Engine,
    decls: &str,
    body: &str,
    grid: u32,
    block: u32,
    n: u32,
    out_bytes: u64,
    aux: &[u8],
) -> (Option<TimedStats>, Vec<u8>) {
    let text = kernel(decls, body);
    let mut d = Device::new("test.ptx", &text, engine);
    let out = d.alloc(out_bytes.max(8));
    let aux_p = d.alloc((aux.len() as u64).max(8));
    if !aux.is_empty() {
        d.write(aux_p, aux);
    }
    let s = d
        .launch(
            "k",
            [grid, 1, 1],
            [block, 1, 1],
            0,
            &[u64_arg(out), u64_arg(aux_p), u32_arg(n)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    (s, d.read(out, out_bytes.max(8)))
}

/// `rounds` iterations of 32 adds `%r10 += operand`, each depending on the previous one, with
/// the loop control interleaved so it never delays them; stores `%r10` to `out[0]`.
pub fn dependent_chain(rounds: u32, operand: &str) -> String {
    let mut b =
        format!("    mov.u32 %r10, 0;\n    mov.u32 %r11, 1;\n    mov.u32 %r20, 0;\n    mov.u32 %r21, {rounds};\nL:\n");
    for i in 0..32 {
        b += &format!("    add.u32 %r10, %r10, {operand};\n");
        if i == 8 {
            b += "    add.u32 %r20, %r20, 1;\n";
        }
        if i == 20 {
            b += "    setp.lt.u32 %p1, %r20, %r21;\n";
        }
    }
    b += "    @%p1 bra L;\n    st.global.u32 [%rd0], %r10;\n";
    b
}

/// `k` distinct values below `n` from a small deterministic generator (xorshift): the
/// seeded fault points of the fault tests.
pub fn seeded(seed: u64, n: u64, k: usize) -> Vec<u64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::new();
    while out.len() < k {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let r = x % n;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}
