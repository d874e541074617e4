//! Simulator-free tests of the suite: names, PTX entry points and signatures against the
//! launches the host programs actually make, determinism of the inputs, problem sizes, and the
//! PTX features the suite promises to exercise.
//!
//! A [`Recorder`] stands in for an engine: it keeps memory (so host loops terminate), runs no
//! kernel, and checks every call against the kernel's PTX.

use std::collections::{HashMap, HashSet};

use crate::{
    all, Arg, DevPtr, Device, DeviceError, Dim3, Kernel, Launch, Size, Target, Verification,
};

/// One launch as recorded: entry, grid, block, dynamic shared memory, argument count.
#[derive(Clone, Debug, PartialEq)]
struct Recorded {
    entry: String,
    grid: Dim3,
    block: Dim3,
    dynamic_smem: u32,
    args: Vec<Arg>,
}

/// A test double for [`Device`]: allocations are plain byte vectors at distinct addresses.
struct Recorder {
    /// PTX of the kernel under test, for both targets.
    ptx: Vec<&'static str>,
    buffers: Vec<(u64, Vec<u8>)>,
    next: u64,
    launches: Vec<Recorded>,
    writes: Vec<(u64, Vec<u8>)>,
}

impl Recorder {
    fn new(kernel: &dyn Kernel) -> Self {
        Recorder {
            ptx: kernel.sources().iter().map(|&(_, text)| text).collect(),
            buffers: Vec::new(),
            next: 0x1000_0000,
            launches: Vec::new(),
            writes: Vec::new(),
        }
    }

    /// The buffer holding `[addr, addr + len)`, if one does.
    fn find(&mut self, addr: u64, len: u64) -> Result<(&mut Vec<u8>, usize), DeviceError> {
        for (base, data) in &mut self.buffers {
            if addr >= *base && addr + len <= *base + data.len() as u64 {
                return Ok((data, (addr - *base) as usize));
            }
        }
        Err(DeviceError(format!(
            "access of {len} bytes at {addr:#x} outside every allocation"
        )))
    }

    fn is_buffer(&self, p: DevPtr) -> bool {
        self.buffers.iter().any(|(base, _)| *base == p.0)
    }
}

impl Device for Recorder {
    fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
        assert!(bytes > 0, "zero-byte allocation");
        let base = self.next;
        self.next += bytes.div_ceil(256) * 256 + 256;
        self.buffers.push((base, vec![0xA5; bytes as usize]));
        Ok(DevPtr(base))
    }

    fn write(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        let (buf, off) = self.find(dst.0, data.len() as u64)?;
        buf[off..off + data.len()].copy_from_slice(data);
        self.writes.push((dst.0, data.to_vec()));
        Ok(())
    }

    fn read(&mut self, src: DevPtr, len: u64) -> Result<Vec<u8>, DeviceError> {
        let (buf, off) = self.find(src.0, len)?;
        Ok(buf[off..off + len as usize].to_vec())
    }

    fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
        for ptx in &self.ptx {
            let params = entry_params(ptx, l.entry)
                .unwrap_or_else(|| panic!("no `.entry {}(` in the kernel's PTX", l.entry));
            assert_eq!(params.len(), l.args.len(), "{}: argument count", l.entry);
            for (i, (ty, arg)) in params.iter().zip(l.args).enumerate() {
                let ok = match arg {
                    Arg::Ptr(_) | Arg::U64(_) => matches!(ty.as_str(), ".u64" | ".s64" | ".b64"),
                    Arg::U32(_) | Arg::I32(_) => matches!(ty.as_str(), ".u32" | ".s32" | ".b32"),
                    Arg::F32(_) => ty == ".f32",
                    Arg::F64(_) => ty == ".f64",
                };
                assert!(ok, "{}: parameter {i} is {ty}, argument {arg:?}", l.entry);
            }
        }
        for arg in l.args {
            if let Arg::Ptr(p) = arg {
                assert!(
                    self.is_buffer(*p),
                    "{}: pointer {p:?} is not an allocation",
                    l.entry
                );
            }
        }
        let threads = l.block.count();
        assert!(
            (1..=1024).contains(&threads),
            "{}: {threads} threads per TB",
            l.entry
        );
        assert!(l.grid.count() >= 1, "{}: empty grid", l.entry);
        assert!(
            l.dynamic_smem <= 48 * 1024,
            "{}: dynamic shared memory",
            l.entry
        );
        self.launches.push(Recorded {
            entry: l.entry.to_string(),
            grid: l.grid,
            block: l.block,
            dynamic_smem: l.dynamic_smem,
            args: l.args.to_vec(),
        });
        Ok(())
    }
}

/// The parameter types (`.u64`, `.f32`, ...) of `.entry name(...)`, or None if absent.
fn entry_params(ptx: &str, name: &str) -> Option<Vec<String>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let list = &rest[rest.find('(')? + 1..rest.find(')')?];
    Some(
        list.split(',')
            .filter_map(|p| {
                let mut words = p.split_whitespace();
                (words.next()? == ".param").then(|| words.next().map(str::to_string))?
            })
            .collect(),
    )
}

/// Total bytes of static `.shared` declarations (`.shared .align A .b8 name[N];`).
fn static_shared_bytes(ptx: &str) -> u64 {
    ptx.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(".shared") && !l.contains(".extern"))
        .filter_map(|l| {
            let elem: u64 = [
                (".b8", 1),
                (".b16", 2),
                (".b32", 4),
                (".b64", 8),
                (".f32", 4),
                (".u32", 4),
            ]
            .iter()
            .find(|(t, _)| l.contains(&format!("{t} ")))
            .map(|&(_, s)| s)?;
            let count: u64 = l[l.find('[')? + 1..l.find(']')?].parse().ok()?;
            Some(elem * count)
        })
        .sum()
}

fn record(kernel: &dyn Kernel, size: Size, seed: u64) -> (Recorder, Verification) {
    let mut dev = Recorder::new(kernel);
    let v = kernel
        .run(&mut dev, size, seed)
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name()));
    (dev, v)
}

#[test]
fn names_are_unique_and_described() {
    let mut names = HashSet::new();
    for k in all() {
        assert!(names.insert(k.name()), "duplicate name {}", k.name());
        assert!(!k.name().is_empty() && !k.name().contains(char::is_whitespace));
        assert!(!k.description().is_empty());
        assert!(!k.traits().is_empty());
        assert!(crate::by_name(k.name()).is_some());
    }
    assert!(all().len() >= 16);
}

#[test]
fn ptx_targets_match() {
    for k in all() {
        let targets: Vec<Target> = k.sources().iter().map(|&(t, _)| t).collect();
        assert!(
            targets == [Target::Sm70, Target::Sm90] || targets == [Target::Sm80, Target::Sm90],
            "{}: targets {targets:?}",
            k.name()
        );
        assert_eq!(k.default_target(), targets[0]);
        for t in Target::ALL {
            let Some(ptx) = k.ptx(t) else {
                assert!(!targets.contains(&t));
                continue;
            };
            assert!(
                ptx.contains(&format!(".target {}", t.name())),
                "{} {}",
                k.name(),
                t.name()
            );
            assert!(ptx.contains("Generated by NVIDIA NVVM Compiler"));
            assert!(ptx.contains(".address_size 64"));
            // sm_70 and sm_80 come from NVRTC 12 (CUDA 13 dropped Volta), sm_90 from 13.
            let release = if t == Target::Sm90 {
                "release 13."
            } else {
                "release 12."
            };
            assert!(
                ptx.contains(release),
                "{} {}: needs {release}",
                k.name(),
                t.name()
            );
        }
    }
}

/// Runs every host program against the recorder: each launched entry exists in both PTX files
/// with a matching signature, and a device that computes nothing fails verification (so no
/// check is vacuous).
#[test]
fn launches_match_ptx_and_checks_are_not_vacuous() {
    for k in all() {
        for size in [Size::Small, Size::Large] {
            let (dev, v) = record(*k, size, 1);
            assert!(!dev.launches.is_empty(), "{}", k.name());
            match v {
                Verification::Failed { mismatches, first } => {
                    assert!(mismatches > 0 && !first.is_empty(), "{}", k.name())
                }
                Verification::Passed { .. } => {
                    panic!("{} {size:?} passed although no kernel ran", k.name())
                }
            }
        }
    }
}

#[test]
fn inputs_are_deterministic_and_seeded() {
    for k in all() {
        let (a, _) = record(*k, Size::Small, 7);
        let (b, _) = record(*k, Size::Small, 7);
        let (c, _) = record(*k, Size::Small, 8);
        // assert! rather than assert_eq!: the buffers are too large to print.
        assert!(
            a.writes == b.writes,
            "{}: same seed, different inputs",
            k.name()
        );
        assert!(
            a.launches == b.launches,
            "{}: same seed, different launches",
            k.name()
        );
        let differs = a.writes != c.writes || a.launches != c.launches;
        assert!(differs, "{}: the seed changes nothing", k.name());
    }
}

/// Small runs stay small (thread count summed over launches) but use several TBs; Large ones
/// are bigger.
#[test]
fn sizes_are_sensible() {
    let threads = |d: &Recorder| -> u64 {
        d.launches
            .iter()
            .map(|l| l.grid.count() * l.block.count())
            .sum()
    };
    for k in all() {
        let (small, _) = record(*k, Size::Small, 3);
        let (large, _) = record(*k, Size::Large, 3);
        let (s, l) = (threads(&small), threads(&large));
        assert!(s <= 200_000, "{}: {s} threads in Small", k.name());
        let max_grid = small.launches.iter().map(|l| l.grid.count()).max().unwrap();
        assert!(max_grid >= 2, "{}: Small has a single TB", k.name());
        assert!(
            l >= 4 * s,
            "{}: Large ({l}) is not much bigger than Small ({s})",
            k.name()
        );
    }
}

#[test]
fn stress_kernels_use_their_resource() {
    use crate::Stress;
    for k in all() {
        let smem = static_shared_bytes(k.ptx(k.default_target()).unwrap());
        match k.stress() {
            Stress::SharedMemory => assert!(smem >= 16 * 1024, "{}: {smem} bytes", k.name()),
            Stress::TbSlots => {
                let (d, _) = record(*k, Size::Small, 1);
                assert!(
                    d.launches.iter().all(|l| l.block.count() <= 64),
                    "{}",
                    k.name()
                );
            }
            Stress::WarpSlots => {
                let (d, _) = record(*k, Size::Small, 1);
                assert!(
                    d.launches.iter().all(|l| l.block.count() >= 256),
                    "{}",
                    k.name()
                );
            }
            Stress::Registers | Stress::None => {}
        }
    }
    let conv = crate::by_name("conv2d").unwrap();
    assert!(static_shared_bytes(conv.ptx(Target::Sm70).unwrap()) >= 24 * 1024);
    let stresses: HashSet<_> = all().iter().map(|k| format!("{:?}", k.stress())).collect();
    for s in ["Registers", "SharedMemory", "WarpSlots", "TbSlots"] {
        assert!(stresses.contains(s), "no kernel stresses {s}");
    }
}

/// The PTX features the suite is meant to cover (kernels/README.md), per kernel, in both
/// targets: regenerating PTX that loses one breaks this test.
#[test]
fn ptx_features_are_present() {
    let expect: HashMap<&str, &[&str]> = HashMap::from([
        ("gemm", &["bar.sync", "ld.shared.f32", "fma.rn.f32"][..]),
        (
            "kmeans",
            &[".func", "call", "cvta.shared", "atom.global.add.u32"][..],
        ),
        ("branchy", &[".local", "st.local", "ld.local"][..]),
        (
            "reduce",
            &[
                "shfl.sync.down",
                "shfl.sync.bfly",
                "vote.sync.ballot",
                "popc.b32",
            ][..],
        ),
        ("hist", &["atom.shared.add.u32", "atom.global.add.u32"][..]),
        ("scan", &[".extern .shared", "bar.sync"][..]),
        (
            "mandel",
            &["atom.global.add.u32", "mul.lo.s64", "shr.s64", "bar.sync"][..],
        ),
        (
            "dgemv",
            &["fma.rn.f64", "ld.global.nc.f64", "st.global.f64"][..],
        ),
        (
            "blackscholes",
            &["ex2.approx", "sqrt.rn.f32", "div.rn.f32"][..],
        ),
        ("conv2d", &["bar.sync", "ld.shared.f32"][..]),
        ("bitonic", &["bar.sync", "ld.shared.u32"][..]),
        ("pathfinder", &["bar.sync", "ld.shared.u32"][..]),
        (
            "layernorm",
            &[
                "shfl.sync.bfly.b32",
                "ld.global.nc.v4.f32",
                "st.global.v4.f32",
                "rsqrt.approx.f32",
            ][..],
        ),
        (
            "softmax",
            &[
                "shfl.sync.bfly.b32",
                "max.f32",
                "ex2.approx.ftz.f32",
                "bar.sync",
                "ld.shared.f32",
            ][..],
        ),
        (
            "mulword",
            &[
                "mad.lo.cc.u32",
                "madc.lo.cc.u32",
                "madc.hi.cc.u32",
                "mad.lo.cc.u64",
                "madc.hi.cc.u64",
                "addc.u64",
                "add.cc.u32",
                "addc.cc.u32",
                "sub.cc.u32",
                "subc.cc.u32",
                "subc.u32",
            ][..],
        ),
        (
            "warpred",
            &[
                "redux.sync.add.s32",
                "redux.sync.min.s32",
                "redux.sync.max.s32",
                "match.any.sync.b32",
                "match.all.sync.b32",
                "vote.sync.ballot.b32",
                "popc.b32",
                "atom.global.min.s32",
                "atom.global.max.s32",
            ][..],
        ),
        (
            "wgemm",
            &[
                "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16",
                "wmma.load.b.sync.aligned.col.m16n16k16.shared.f16",
                "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32",
                "wmma.load.c.sync.aligned.row.m16n16k16.global.f32",
                "wmma.store.d.sync.aligned.row.m16n16k16.global.f32",
            ][..],
        ),
        (
            "mgemm",
            &[
                "cp.async.cg.shared.global",
                "cp.async.commit_group",
                "cp.async.wait_group 1",
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
            ][..],
        ),
        (
            "attention",
            &[
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                "cp.async.cg.shared.global",
                "cp.async.wait_group 1",
                "cvt.rn.f16x2.f32",
                "shfl.sync.bfly",
                "ex2.approx.ftz.f32",
            ][..],
        ),
    ]);
    for (name, features) in expect {
        let k = crate::by_name(name).unwrap();
        for &(t, text) in k.sources() {
            for f in features {
                assert!(text.contains(f), "{name} {}: no `{f}`", t.name());
            }
        }
    }
    // dct8 is the register-limited kernel: its coefficients must fold to immediates rather
    // than spill to local memory.
    assert!(!crate::by_name("dct8")
        .unwrap()
        .ptx(Target::Sm70)
        .unwrap()
        .contains(".local"));
}

#[test]
fn entry_params_parses_signatures() {
    let ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .f32 k_param_1\n)\n{";
    assert_eq!(
        entry_params(ptx, "k"),
        Some(vec![".u64".to_string(), ".f32".to_string()])
    );
    assert_eq!(entry_params(ptx, "x"), None);
    assert_eq!(
        static_shared_bytes(".shared .align 4 .b8 t[27200];\n.extern .shared .b8 s[];"),
        27200
    );
}
