//! Real hardware as a [`Device`]: the suite's host programs run on a GPU through a device
//! server (`tools/cuda_device.py`), a child process spoken to over its stdin and stdout.
//!
//! This is how the timing model is checked against the truth (docs/design.md, "truth"):
//! the same committed PTX, the same seeded inputs and the same CPU reference run on the real
//! GPU, which times every launch, and [`compare`] sets those times beside a timed run's
//! statistics. The protocol is documented in the server; each message is one JSON line,
//! followed by a raw payload when the line says how long one is.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use suite::{Arg, DevPtr, Device, DeviceError, Launch};

/// What the server says of its GPU when it starts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HardwareInfo {
    pub device: String,
    #[serde(default)]
    pub sms: u32,
    #[serde(default)]
    pub l2_bytes: u64,
    /// The SM clock's maximum (boost) frequency, 0 when the server cannot read it.
    #[serde(default)]
    pub max_sm_clock_mhz: f64,
}

/// One launch as the real GPU ran it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HardwareLaunch {
    pub entry: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem: u32,
    /// Each timed repetition, in milliseconds (CUDA events around the launch alone).
    pub ms: Vec<f64>,
    pub ms_median: f64,
    /// The highest SM clock read during the repetitions (MHz; 0 when unknown).
    pub sm_clock_mhz: f64,
}

/// A [`Device`] backed by a device server.
pub struct ServerDevice {
    child: Child,
    /// `None` only while dropping: closing it ends the server's loop.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub info: HardwareInfo,
    /// Every launch since the last [`ServerDevice::take_launches`].
    launches: Vec<HardwareLaunch>,
}

fn err(msg: impl Into<String>) -> DeviceError {
    DeviceError(msg.into())
}

impl ServerDevice {
    /// Starts `command` (run by `sh -c`, so it may carry arguments) and reads its greeting.
    pub fn spawn(command: &str) -> Result<ServerDevice, DeviceError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("cannot start the device server `{command}`: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut dev = ServerDevice {
            child,
            stdin,
            stdout,
            info: HardwareInfo::default(),
            launches: Vec::new(),
        };
        let hello = dev.receive()?;
        dev.info = serde_json::from_value(hello.clone()).map_err(|e| {
            err(format!(
                "the device server `{command}` did not describe its GPU ({e}): {hello}"
            ))
        })?;
        Ok(dev)
    }

    fn send(&mut self, header: Value, payload: &[u8]) -> Result<(), DeviceError> {
        let mut line = header.to_string();
        line.push('\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| err("the device server is closed"))?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(payload))
            .and_then(|()| stdin.flush())
            .map_err(|e| err(format!("the device server stopped reading: {e}")))
    }

    fn receive(&mut self) -> Result<Value, DeviceError> {
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| err(format!("reading from the device server: {e}")))?;
        if n == 0 {
            return Err(err("the device server exited (its own message is above)"));
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| err(format!("the device server sent `{}`: {e}", line.trim())))?;
        if let Some(e) = v.get("error") {
            return Err(err(format!(
                "real GPU: {}",
                e.as_str().unwrap_or("unknown error")
            )));
        }
        Ok(v)
    }

    fn call(&mut self, header: Value, payload: &[u8]) -> Result<Value, DeviceError> {
        self.send(header, payload)?;
        self.receive()
    }

    /// Loads a PTX module; launches name its entries until the next load.
    pub fn load(&mut self, name: &str, ptx: &str) -> Result<(), DeviceError> {
        self.call(
            json!({"op": "load", "name": name, "len": ptx.len()}),
            ptx.as_bytes(),
        )
        .map(drop)
    }

    /// Frees every allocation (between host programs).
    pub fn reset(&mut self) -> Result<(), DeviceError> {
        self.call(json!({"op": "reset"}), &[]).map(drop)
    }

    /// The launches run since the last call, in order.
    pub fn take_launches(&mut self) -> Vec<HardwareLaunch> {
        std::mem::take(&mut self.launches)
    }
}

impl Drop for ServerDevice {
    fn drop(&mut self) {
        // Closing stdin ends the server's loop; wait so no zombie is left.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn arg_json(a: &Arg) -> Value {
    let (t, v): (&str, u64) = match *a {
        Arg::Ptr(p) => ("ptr", p.0),
        Arg::U32(x) => ("u32", x as u64),
        Arg::I32(x) => ("i32", x as u32 as u64),
        Arg::U64(x) => ("u64", x),
        Arg::F32(x) => ("f32", x.to_bits() as u64),
        Arg::F64(x) => ("f64", x.to_bits()),
    };
    json!({"t": t, "v": v})
}

fn field_u64(v: &Value, key: &str) -> Result<u64, DeviceError> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| err(format!("the device server's answer lacks `{key}`: {v}")))
}

/// The median of a non-empty sample (the mean of the two middle values for an even count).
pub fn median(xs: &[f64]) -> f64 {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

impl Device for ServerDevice {
    fn alloc(&mut self, bytes: u64) -> Result<DevPtr, DeviceError> {
        let v = self.call(json!({"op": "alloc", "bytes": bytes}), &[])?;
        Ok(DevPtr(field_u64(&v, "ptr")?))
    }

    fn write(&mut self, dst: DevPtr, data: &[u8]) -> Result<(), DeviceError> {
        self.call(
            json!({"op": "write", "ptr": dst.0, "len": data.len()}),
            data,
        )
        .map(drop)
    }

    fn read(&mut self, src: DevPtr, len: u64) -> Result<Vec<u8>, DeviceError> {
        let v = self.call(json!({"op": "read", "ptr": src.0, "len": len}), &[])?;
        let n = field_u64(&v, "len")?;
        if n != len {
            return Err(err(format!(
                "the device server returned {n} bytes for a read of {len}"
            )));
        }
        let mut buf = vec![0u8; len as usize];
        self.stdout
            .read_exact(&mut buf)
            .map_err(|e| err(format!("reading {len} bytes from the device server: {e}")))?;
        Ok(buf)
    }

    fn launch(&mut self, l: &Launch<'_>) -> Result<(), DeviceError> {
        let grid = [l.grid.x, l.grid.y, l.grid.z];
        let block = [l.block.x, l.block.y, l.block.z];
        let args: Vec<Value> = l.args.iter().map(arg_json).collect();
        let v = self.call(
            json!({"op": "launch", "entry": l.entry, "grid": grid, "block": block,
                   "smem": l.dynamic_smem, "args": args}),
            &[],
        )?;
        let ms: Vec<f64> = v
            .get("ms")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if ms.is_empty() {
            return Err(err(format!("the device server timed nothing: {v}")));
        }
        self.launches.push(HardwareLaunch {
            entry: l.entry.to_string(),
            grid,
            block,
            dynamic_smem: l.dynamic_smem,
            ms_median: median(&ms),
            ms,
            sm_clock_mhz: v.get("sm_clock_mhz").and_then(Value::as_f64).unwrap_or(0.0),
        });
        Ok(())
    }
}

/// One kernel's simulated and real time, set side by side by [`compare`].
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub kernel: String,
    pub launches: usize,
    /// Simulated core cycles over every launch, and that time at the preset's clock.
    pub sim_cycles: u64,
    pub sim_us: f64,
    /// The real GPU's time over every launch (sum of per-launch medians), and that time in
    /// cycles of the SM clock read during the runs.
    pub hw_us: f64,
    pub hw_cycles: f64,
    /// sim_cycles / hw_cycles.
    pub ratio: f64,
}

/// Correlation and error of simulated against real cycles, over kernels.
#[derive(Clone, Debug, Serialize)]
pub struct Agreement {
    pub kernels: usize,
    /// Pearson correlation of simulated and real cycles.
    pub correlation: f64,
    /// Mean of |sim − hw| / hw.
    pub mean_abs_error: f64,
    /// Geometric mean of sim / hw.
    pub geomean_ratio: f64,
}

/// Pearson correlation (NaN for fewer than two points or no spread).
pub fn pearson(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len().min(ys.len()) as f64;
    if n < 2.0 {
        return f64::NAN;
    }
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in xs.iter().zip(ys) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    sxy / (sxx * syy).sqrt()
}

/// One kernel as the comparison needs it: per-launch simulated cycles from a `run --stats`
/// file, or per-launch real times from a `hardware` report.
pub struct KernelTimes<'a> {
    pub kernel: &'a str,
    pub values: Vec<f64>,
}

/// Sets simulated cycles (at `sim_clock_mhz`) beside real times (µs, at `hw_clock_mhz`),
/// kernel by kernel, for the kernels both sides ran with the same number of launches.
/// Returns the rows and the agreement over them, and the names of kernels left out, each
/// with the reason.
pub fn compare(
    sim: &[KernelTimes<'_>],
    hw: &[KernelTimes<'_>],
    sim_clock_mhz: f64,
    hw_clock_mhz: f64,
) -> (Vec<Comparison>, Agreement, Vec<String>) {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for h in hw {
        let Some(s) = sim.iter().find(|s| s.kernel == h.kernel) else {
            skipped.push(format!("{}: not in the simulated run", h.kernel));
            continue;
        };
        if s.values.len() != h.values.len() {
            skipped.push(format!(
                "{}: {} simulated launches against {} real ones",
                h.kernel,
                s.values.len(),
                h.values.len()
            ));
            continue;
        }
        let sim_cycles: f64 = s.values.iter().sum();
        let hw_us: f64 = h.values.iter().sum();
        let hw_cycles = hw_us * hw_clock_mhz;
        rows.push(Comparison {
            kernel: h.kernel.to_string(),
            launches: h.values.len(),
            sim_cycles: sim_cycles as u64,
            sim_us: sim_cycles / sim_clock_mhz,
            hw_us,
            hw_cycles,
            ratio: sim_cycles / hw_cycles,
        });
    }
    let xs: Vec<f64> = rows.iter().map(|r| r.sim_cycles as f64).collect();
    let ys: Vec<f64> = rows.iter().map(|r| r.hw_cycles).collect();
    let n = rows.len().max(1) as f64;
    let agreement = Agreement {
        kernels: rows.len(),
        correlation: pearson(&xs, &ys),
        mean_abs_error: rows.iter().map(|r| (r.ratio - 1.0).abs()).sum::<f64>() / n,
        geomean_ratio: experiment::figures::geomean(
            &rows.iter().map(|r| r.ratio).collect::<Vec<_>>(),
        ),
    };
    (rows, agreement, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_of_a_line_is_one_and_of_its_mirror_minus_one() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let y: Vec<f64> = x.iter().map(|v| 3.0 * v + 1.0).collect();
        let z: Vec<f64> = x.iter().map(|v| -v).collect();
        assert!((pearson(&x, &y) - 1.0).abs() < 1e-12);
        assert!((pearson(&x, &z) + 1.0).abs() < 1e-12);
        assert!(pearson(&x[..1], &y[..1]).is_nan());
    }

    #[test]
    fn median_takes_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn compare_converts_both_sides_to_cycles_and_skips_mismatched_launch_counts() {
        // 2,000 simulated cycles at 1,000 MHz = 2 µs; 1 µs real at 2,000 MHz = 2,000 cycles.
        let sim = [
            KernelTimes {
                kernel: "a",
                values: vec![500.0, 1500.0],
            },
            KernelTimes {
                kernel: "b",
                values: vec![4000.0],
            },
            KernelTimes {
                kernel: "c",
                values: vec![1.0, 2.0],
            },
        ];
        let hw = [
            KernelTimes {
                kernel: "a",
                values: vec![0.25, 0.75],
            },
            KernelTimes {
                kernel: "b",
                values: vec![1.0],
            },
            KernelTimes {
                kernel: "c",
                values: vec![1.0],
            },
            KernelTimes {
                kernel: "d",
                values: vec![1.0],
            },
        ];
        let (rows, agree, skipped) = compare(&sim, &hw, 1000.0, 2000.0);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].sim_us, 2.0);
        assert_eq!(rows[0].hw_cycles, 2000.0);
        assert_eq!(rows[0].ratio, 1.0);
        assert_eq!(rows[1].ratio, 2.0);
        assert!((agree.geomean_ratio - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(agree.mean_abs_error, 0.5);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
    }
}
