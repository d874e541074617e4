//! Shared by the `timing_*` tests: a small device that loads PTX and runs launches on either
//! the functional core or the timed GPU, over the same device memory.
//!
//! `gpu::Gpu` keeps its memory and modules private, so the pieces of its `load_ptx` and
//! `launch` that build a `LaunchCtx` (global placement, parameter buffer, shared-memory size)
//! are repeated here. A `Gpu::launch_with` taking an engine would remove this copy.

#![allow(dead_code)]

use gpu::config::GpuConfig;
use gpu::exec::LaunchCtx;
use gpu::memory::DeviceMemory;
use gpu::timing::{TimedGpu, TimedStats, TimingOptions};
use kir::{Id, Module};
use ptx::SourceFile;

/// Which engine runs a launch.
#[derive(Clone, Debug)]
pub enum Engine {
    Functional,
    Timed(Box<TimedGpu>),
}

impl Engine {
    /// The timed GTX480: `configs/gtx480.toml` with the matching memory preset.
    pub fn gtx480() -> Engine {
        Engine::Timed(Box::new(TimedGpu {
            gpu: GpuConfig::preset("gtx480").unwrap(),
            memory: memsys::presets::gtx480(),
            options: TimingOptions::default(),
        }))
    }
}

/// A loaded module over its own device memory.
pub struct Device {
    pub mem: DeviceMemory,
    pub module: Module,
    pub source: SourceFile,
    pub global_addrs: Vec<u64>,
    pub engine: Engine,
    /// Allocations made through `alloc`: (base, size).
    pub allocs: Vec<(u64, u64)>,
    pub stats: Vec<TimedStats>,
}

impl Device {
    pub fn new(file: &str, ptx_text: &str, engine: Engine) -> Device {
        let ast = ptx::parse(ptx_text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let module =
            kir::lower::lower_module(&ast, file).unwrap_or_else(|e| panic!("{file}: {}", e[0]));
        let problems = gpu::validate::check_module(&module);
        assert!(problems.is_empty(), "{file}: {problems:?}");
        let mut mem = DeviceMemory::new();
        let global_addrs: Vec<u64> = module
            .globals
            .values()
            .map(|g| mem.alloc(g.size.max(1)))
            .collect();
        for (id, g) in module.globals.iter() {
            let mut bytes = g.init.clone();
            for r in &g.relocations {
                let addr = global_addrs[r.target.index()].wrapping_add(r.addend as u64);
                let (at, w) = (r.offset as usize, r.width as usize);
                bytes[at..at + w].copy_from_slice(&addr.to_le_bytes()[..w]);
            }
            if !bytes.is_empty() {
                mem.write_bytes(global_addrs[id.index()], &bytes).unwrap();
            }
        }
        Device {
            mem,
            module,
            source: SourceFile::new(file, ptx_text),
            global_addrs,
            engine,
            allocs: Vec::new(),
            stats: Vec::new(),
        }
    }

    pub fn alloc(&mut self, bytes: u64) -> u64 {
        let p = self.mem.alloc(bytes);
        self.allocs.push((p, bytes));
        p
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) {
        self.mem.write_bytes(addr, data).unwrap();
    }

    pub fn read(&self, addr: u64, len: u64) -> Vec<u8> {
        self.mem.read_bytes(addr, len).unwrap().to_vec()
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
        let (_, k) = self
            .module
            .kernel(entry)
            .ok_or_else(|| format!("no kernel {entry}"))?;
        assert_eq!(args.len(), k.params.len(), "argument count of {entry}");
        let mut params = vec![0u8; k.param_size as usize];
        for (p, a) in k.params.iter().zip(args) {
            assert_eq!(a.len(), p.size as usize, "size of parameter {}", p.name);
            params[p.offset as usize..p.offset as usize + a.len()].copy_from_slice(a);
        }
        let static_aligned = if k.uses_dynamic_smem {
            k.static_smem.next_multiple_of(16)
        } else {
            k.static_smem
        };
        let num_sms = match &self.engine {
            Engine::Functional => 15,
            Engine::Timed(t) => t.gpu.sm.count,
        };
        let ctx = LaunchCtx {
            kernel: k,
            source: &self.source,
            grid,
            block,
            params,
            global_addrs: &self.global_addrs,
            dynamic_smem,
            smem_size: static_aligned + dynamic_smem,
            num_sms,
            grid_id: self.stats.len() as u64 + 1,
        };
        match &self.engine {
            Engine::Functional => {
                gpu::func::run(&ctx, &mut self.mem, 1 << 36).map_err(|e| e.to_string())?;
                Ok(None)
            }
            Engine::Timed(t) => {
                let s = t.launch(&ctx, &mut self.mem).map_err(|e| e.to_string())?;
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
        self.mem
            .write_bytes(dst.0, data)
            .map_err(|e| suite::DeviceError(format!("{e:?}")))
    }

    fn read(&mut self, src: suite::DevPtr, len: u64) -> Result<Vec<u8>, suite::DeviceError> {
        self.mem
            .read_bytes(src.0, len)
            .map(|b| b.to_vec())
            .map_err(|e| suite::DeviceError(format!("{e:?}")))
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
