//! A seeded fuzz test of the scenario loader and the host model on hostile values (issue 21):
//! extreme numbers, huge repeats, bad tolerances, missing and special files (`/dev/zero`, a
//! directory, a FIFO), unknown GPU presets and GPU files. A few hundred scenarios, the same
//! ones on every run; each must be refused with an error that says where, or load and then
//! run (under a small cycle limit) to a result or an error: never a panic, a hang or an
//! allocation beyond the loader's bounds.

use std::panic::{catch_unwind, AssertUnwindSafe};

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Disk, Setup, System};

const SAXPY: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }

    /// `sane` most of the time, one of `xs` (hostile values, mostly) one time in five.
    fn or<'a>(&mut self, sane: &'a str, xs: &[&'a str]) -> &'a str {
        if self.next().is_multiple_of(5) {
            self.pick(xs)
        } else {
            sane
        }
    }
}

const TIMES: &[&str] = &[
    "0.0", "1.0", "1e-12", "1e-300", "1e6", "1e9", "1e12", "1e300", "-1.0", "inf", "-inf", "nan",
];
const GBPS: &[&str] = &[
    "8.0", "1e-12", "1e-300", "1e-6", "0.0", "1e6", "1e7", "inf", "nan", "-8.0",
];
const COUNTS: &[&str] = &[
    "0",
    "1",
    "3",
    "4096",
    "4097",
    "4294967295",
    "9223372036854775807",
];
const LENS: &[&str] = &[
    "0",
    "1",
    "64",
    "134217728",
    "268435456",
    "1073741824",
    "4294967296",
    "18446744073709551615",
];
const TOLERANCES: &[&str] = &["0.0", "1e-6", "1e300", "inf", "-inf", "nan", "-1e-6"];
const GPUS: &[&str] = &[
    "gtx480",
    "h100",
    "gtx4800",
    "",
    "missing.toml",
    "dir.toml",
    "fifo.toml",
    "bad.toml",
    "good.toml",
    "/dev/zero",
];

fn scenario(r: &mut Rng, dir: &str) -> String {
    let mut s = String::new();
    if r.next().is_multiple_of(3) {
        s += &format!("gpu = \"{}\"\n", r.pick(GPUS));
    }
    s += &format!(
        "[scheduler]\nactive_kernels = {}\ntime_slice_us = {}\n\n",
        r.or("4", COUNTS),
        r.or("50.0", TIMES)
    );
    s += &format!(
        "[host]\npcie_gbps = {}\ncopy_latency_us = {}\nlaunch_latency_us = {}\ncopy_engines = {}\n\n",
        r.or("8.0", GBPS),
        r.or("5.0", TIMES),
        r.or("5.0", TIMES),
        r.or("1", COUNTS)
    );
    let file = r.pick(&[
        "/dev/zero",
        dir,
        "fifo.bin",
        "missing.bin",
        "x.bin",
        "big.bin",
    ]);
    let init = if r.next().is_multiple_of(4) {
        format!("init = \"file\"\nfile = \"{file}\"\n")
    } else {
        format!("len = {}\ninit = \"iota\"\n", r.or("64", LENS))
    };
    s += &format!(
        "[[process]]\nname = \"p\"\nptx = \"saxpy.ptx\"\narrival_us = {}\n\n\
         [[process.buffer]]\nname = \"x\"\ntype = \"f32\"\n{init}\n\
         [[process.command]]\ncopy = \"x\"\n\n\
         [[process.command]]\nrepeat = {}\n[[process.command.body]]\nlaunch = \"saxpy\"\ngrid = [1]\nblock = [32]\n\
         args = [{{ buffer = \"x\" }}, {{ buffer = \"x\" }}, {{ f32 = 2.0 }}, {{ u32 = 8 }}]\n\n\
         [[process.check]]\nbuffer = \"x\"\nfill = 1.0\ntolerance = {}\n",
        r.or("0.0", TIMES),
        r.or("3", COUNTS),
        r.or("0.0", TOLERANCES)
    );
    s
}

#[test]
fn hostile_scenarios_are_refused_where_they_are_wrong_or_run_within_bounds() {
    let dir = std::env::temp_dir().join(format!("switchyard-loader-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("dir.toml")).unwrap();
    std::fs::write(dir.join("saxpy.ptx"), SAXPY).unwrap();
    std::fs::write(dir.join("x.bin"), [0u8; 32]).unwrap();
    std::fs::File::create(dir.join("big.bin"))
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let gtx480 = gpu::config::PRESETS
        .iter()
        .find(|(n, _)| *n == "gtx480")
        .unwrap()
        .1;
    std::fs::write(dir.join("good.toml"), gtx480).unwrap();
    std::fs::write(
        dir.join("bad.toml"),
        gtx480.replace("t_refi = 3604", "t_refi = 1"),
    )
    .unwrap();
    for fifo in ["fifo.bin", "fifo.toml"] {
        let _ = std::process::Command::new("mkfifo")
            .arg(dir.join(fifo))
            .status();
    }
    let file = dir.join("s.toml").display().to_string();
    let mut rng = Rng(0x5eed_0021);
    let (mut refused, mut ran, mut failed) = (0, 0, 0);
    for i in 0..300 {
        let text = scenario(&mut rng, &dir.display().to_string());
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let s = match parse(&file, &text, &Disk) {
                Ok(s) => s,
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.starts_with(&file), "case {i}: unlocated: {e}\n{text}");
                    return 0;
                }
            };
            // Loaded: nothing it holds is out of its bounds.
            for p in &s.processes {
                let workload::scenario::Program::Commands(c) = &p.program else {
                    continue;
                };
                for check in &c.checks {
                    assert!(
                        check.tolerance.is_finite() && check.tolerance >= 0.0,
                        "case {i}: tolerance {}\n{text}",
                        check.tolerance
                    );
                }
            }
            let gpu = match s.gpu.as_deref() {
                None => GpuConfig::preset("gtx480").unwrap(),
                Some(g) if g.ends_with(".toml") => {
                    GpuConfig::from_toml(g, &String::from_utf8(std::fs::read(g).unwrap()).unwrap())
                        .unwrap_or_else(|e| panic!("case {i}: checked at load, now {e}"))
                }
                Some(g) => GpuConfig::preset(g).unwrap(),
            };
            // A scenario's `[translation]` may conflict with its GPU's own fields: an error.
            let Ok(setup) = Setup::for_scenario(&s, TimedGpu::new(gpu), 50_000) else {
                return 2;
            };
            match System::new(setup, &s.processes).and_then(|sys| sys.run(&mut |_| {})) {
                Ok(_) => 1,
                Err(_) => 2,
            }
        }));
        match outcome {
            Ok(0) => refused += 1,
            Ok(1) => ran += 1,
            Ok(_) => failed += 1,
            Err(_) => panic!("case {i} panicked:\n{text}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // Most hostile scenarios are refused, but the generator reaches runs too.
    assert!(
        refused >= 150 && ran + failed >= 5,
        "{refused} refused, {ran} ran, {failed} failed"
    );
}
