//! Scheduling policies: which waiting kernel becomes active, and which active kernel an SM
//! runs (papers/tanasic-thesis §5.2.4, §5.3.2).
//!
//! * [`Fcfs`]: first come, first served. Commands enter the active queue in the order they
//!   reached the GPU; a free SM goes to the earliest active kernel that still has TBs to
//!   issue. One kernel fills the GPU and the next gets SMs as they free up, as the baseline
//!   GPU of the thesis does.
//! * [`Npq`]: non-preemptive priority queues (§5.3.2): the same, ranked by priority first
//!   (larger first), arrival second. A high-priority kernel takes every SM that frees up, but
//!   waits for running TBs to finish: no preemption.
//!
//! * [`Ppq`]: preemptive priority queues (§5.2.4, §5.3.2): when a kernel of higher
//!   priority than some running kernel has TBs to issue and no SM is idle, every SM running
//!   a lower-priority kernel is reserved for it, and the framework's preemption mechanism
//!   empties them. The thesis's two schemes (§5.3.3, Figure 5.5): with *exclusive* access
//!   ([`PpqAccess::Exclusive`]) no kernel below the highest active priority is given an SM
//!   while a kernel of that priority is active, even an SM it leaves idle; with *shared*
//!   access ([`PpqAccess::Shared`], the default) an idle SM goes to the best kernel that
//!   has TBs to issue, as current GPUs schedule independent kernels back to back, and is
//!   taken back when a higher-priority kernel arrives.
//! * [`TimeSlice`]: contexts take turns, each for a time slice (as NVIDIA's driver
//!   schedules contexts by default): when a slice ends and another context has work, every
//!   SM running another context's kernel is reserved for the next context's kernel.
//!
//! A reserved SM is emptied by the preemption mechanism the framework was given (draining
//! when none was).

use gpu::timing::SmId;
use serde::{Deserialize, Serialize};

use crate::corun::{Corun, Ipcs, Scheme, TbCounts, MAX_CORUNNERS, SMK_EPOCH};
use crate::tables::{ContextId, KernelSlot, Ksr, Tables, Waiting};

/// A scheduling policy.
///
/// **Contract.** The framework calls the policy on the events of papers/tanasic-thesis
/// §5.2.4 — a command waits and the active queue has room ([`Policy::admit`]), a kernel
/// entered the active queue ([`Policy::on_kernel_activated`]), an SM became idle
/// ([`Policy::on_sm_idle`]), a reserved SM was emptied ([`Policy::on_preemption_done`]) —
/// and when a kernel finished ([`Policy::on_kernel_finished`]), room asked for was made
/// ([`Policy::on_room_made`]), and, with intra-SM sharing, when a running SM's kernel has no
/// TB left to issue ([`Policy::on_sm_room`], every cycle until the policy assigns it). A
/// policy acts only through the [`Tables`] it is given: [`Tables::assign`] an idle (or, with
/// sharing, finishing) SM to an active kernel, [`Tables::reserve`] a running SM for another
/// kernel, [`Tables::make_room`] on a running SM for some TBs of another, [`Tables::host`]
/// several kernels side by side on an SM and [`Tables::limit`] what each may hold and issue
/// there (co-running schemes, [`crate::corun`]). It never touches the machine, sees no register values, and must be
/// deterministic: the same sequence of calls gives the same decisions. Policies do not own
/// the mechanism that empties a reserved SM; without one the SM drains.
///
/// Stream priorities are below every policy, as the hardware's block scheduler's: an SM
/// assigned to a kernel goes to the kernel of the same context on the stream of highest
/// priority with TBs to issue, and the framework hands running SMs over within a context
/// without preemption ([`crate::SmEntry::yielding`]).
/// A policy decides between contexts.
pub trait Policy {
    fn name(&self) -> &'static str;
    /// Which context's waiting command enters the active queue (there is room); `None`
    /// leaves them all waiting.
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId>;
    fn on_kernel_activated(&mut self, kernel: KernelSlot, tables: &mut Tables);
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables);
    fn on_sm_room(&mut self, sm: SmId, tables: &mut Tables) {
        self.on_sm_idle(sm, tables);
    }
    /// A reserved SM has given up its last TB (a preemption completed) and was set up for
    /// the kernel it was reserved for, or became idle if that kernel is gone.
    fn on_preemption_done(&mut self, _sm: SmId, _tables: &mut Tables) {}
    /// A kernel finished and left the active queue.
    fn on_kernel_finished(&mut self, _tables: &mut Tables) {}
    /// Room asked for on `sm` ([`Tables::make_room`]) was made, and `kernel` joined it.
    fn on_room_made(&mut self, _sm: SmId, _kernel: KernelSlot, _tables: &mut Tables) {}
    /// Every cycle (for policies that act on time, such as time slicing); it must be cheap.
    fn on_cycle(&mut self, _tables: &mut Tables) {}
    /// Whether a kernel of priority `arriving` may, when it arrives, take SMs from a running
    /// kernel of another context of priority `running` (what a mechanism that prepares at
    /// the host's launch call is told about, [`crate::Framework::launch_called`]). By
    /// default no: the policy never preempts on an arrival.
    fn may_preempt_on_arrival(&self, _arriving: i32, _running: i32) -> bool {
        false
    }
}

/// A policy and its parameters (scenario files and the command line choose one).
///
/// One spelling everywhere, the kebab-case name (`time-slice`): on the command line
/// (`--policy time-slice:slice_us=100`), in scenario files (`policy = "time-slice"`, or a
/// table tagged by `kind`: `{ kind = "time-slice", slice_us = 100 }`) and in reports. A field
/// the policy does not have is an error naming it; `time_slice` is a deprecated alias of
/// earlier scenario files.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case", from = "Written")]
pub enum PolicyKind {
    #[default]
    Fcfs,
    Npq,
    Ppq {
        /// Whether lower-priority kernels may use SMs the highest-priority kernels leave idle.
        #[serde(default, skip_serializing_if = "PpqAccess::is_default")]
        access: PpqAccess,
    },
    TimeSlice {
        /// The slice, µs; `None`: the run's default (a scenario's `time_slice_us`).
        #[serde(skip_serializing_if = "Option::is_none")]
        slice_us: Option<f64>,
    },
    /// Dynamic Spatial Sharing ([`crate::dss`]).
    Dss {
        /// Tokens (SMs) of every process; `None`: shares by priority (equal sharing,
        /// `⌊SMs / processes⌋`, when every priority is the same).
        #[serde(skip_serializing_if = "Option::is_none")]
        tokens: Option<u32>,
    },
    /// NVIDIA's Multi-Process Service ([`crate::mps`]).
    Mps {
        /// Every client's active-thread percentage, (0, 100]; `None`: 100.
        #[serde(skip_serializing_if = "Option::is_none")]
        percentage: Option<f64>,
    },
    /// NVIDIA's Multi-Instance GPU, SMs only ([`crate::mig`]).
    Mig {
        /// Equal instances, 1 to [`MAX_MIG_INSTANCES`] (at most one an SM); `None`: one per
        /// process.
        #[serde(skip_serializing_if = "Option::is_none")]
        instances: Option<u32>,
    },
    /// Co-running, each kernel on its own SMs, split evenly ([`crate::corun`]).
    Spatial,
    /// Co-running inside every SM, the second kernel taking what the first leaves
    /// ([`crate::corun`]).
    LeftOver,
    /// Co-running inside every SM under SMK's dominant-resource-fair TB partition and
    /// warp-instruction quotas (Wang et al., HPCA'16; [`crate::corun`]).
    Smk {
        /// Warp instructions per epoch per scheduler, over all kernels, 1 to
        /// [`MAX_SMK_EPOCH`]; `None`: [`crate::corun::SMK_EPOCH`].
        #[serde(skip_serializing_if = "Option::is_none")]
        epoch: Option<u32>,
        /// Each process's standalone IPC, in process order: the quotas' ratio. `None`:
        /// equal quotas.
        #[serde(skip_serializing_if = "Option::is_none")]
        ipc: Option<Ipcs>,
    },
    /// Co-running inside every SM at the TB combination Warped-Slicer finds online (Xu et
    /// al., ISCA'16; [`crate::corun`]): the SMs profile each kernel's performance at 1, 2,
    /// … TBs, then water-filling chooses.
    WarpedSlicer {
        /// Core cycles the profiling SMs run before their sample, 0 to
        /// [`MAX_PROFILE_CYCLES`]; `None`: [`crate::corun::WS_WARM_UP`].
        #[serde(skip_serializing_if = "Option::is_none")]
        warm_up: Option<u32>,
        /// Core cycles of the sample, 1 to [`MAX_PROFILE_CYCLES`]; `None`:
        /// [`crate::corun::WS_SAMPLE`].
        #[serde(skip_serializing_if = "Option::is_none")]
        sample: Option<u32>,
    },
    /// Co-running inside every SM at the TB combination a Maestro-style search finds
    /// online ([`crate::corun`]): from SMK's DRF combination, one neighbour per epoch.
    Maestro {
        /// Core cycles each combination runs for (its second half measured), 2 to
        /// [`MAX_PROFILE_CYCLES`]; `None`: [`crate::corun::MAESTRO_EPOCH`].
        #[serde(skip_serializing_if = "Option::is_none")]
        epoch: Option<u32>,
        /// Each process's standalone IPC, in process order: the search scores harmonic
        /// speedup over them. `None`: the kernels' summed IPC.
        #[serde(skip_serializing_if = "Option::is_none")]
        ipc: Option<Ipcs>,
    },
    /// Co-running inside every SM at the TB combination and request quotas CCBP chooses
    /// online (papers/lin-thesis §4.5; [`crate::corun`], [`crate::ccbp`]): Warped-Slicer's
    /// profile on the SMs gives each kernel's bandwidth curves, then Algorithm 1.
    Ccbp {
        /// Core cycles the profiling SMs run before their sample, 0 to
        /// [`MAX_PROFILE_CYCLES`]; `None`: [`crate::corun::WS_WARM_UP`].
        #[serde(skip_serializing_if = "Option::is_none")]
        warm_up: Option<u32>,
        /// Core cycles of the sample, 1 to [`MAX_PROFILE_CYCLES`]; `None`:
        /// [`crate::corun::WS_SAMPLE`].
        #[serde(skip_serializing_if = "Option::is_none")]
        sample: Option<u32>,
        /// The priority of latency-sensitive kernels in Algorithm 1 (above 1: they grow
        /// earlier), in (0, [`MAX_PRIOR_LSK`]]; `None`: 1.
        #[serde(skip_serializing_if = "Option::is_none")]
        prior_lsk: Option<f64>,
    },
    /// Co-running inside every SM at a given TB combination: so many TBs per SM of each
    /// process's kernels, in process order ([`crate::corun`]).
    Fixed {
        tbs: TbCounts,
        /// Requests towards the L2 each process's kernels may send per 200 core cycles
        /// from each SM, in process order (CCBP's issue rate controllers,
        /// papers/lin-thesis §4.5.1); `None`: not limited.
        #[serde(skip_serializing_if = "Option::is_none")]
        noc: Option<TbCounts>,
    },
}

/// How a policy is written: [`PolicyKind`] with every variant a struct, so that a parameter
/// given to a policy that has none is refused (serde ignores the other fields of an
/// internally tagged unit variant).
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum Written {
    Fcfs {},
    Npq {},
    Ppq {
        #[serde(default)]
        access: PpqAccess,
    },
    #[serde(alias = "time_slice")]
    TimeSlice {
        #[serde(default, deserialize_with = "de_slice_us")]
        slice_us: Option<f64>,
    },
    Dss {
        #[serde(default, deserialize_with = "de_tokens")]
        tokens: Option<u32>,
    },
    Mps {
        #[serde(default, deserialize_with = "de_percentage")]
        percentage: Option<f64>,
    },
    Mig {
        #[serde(default, deserialize_with = "de_instances")]
        instances: Option<u32>,
    },
    Spatial {},
    LeftOver {},
    Smk {
        #[serde(default, deserialize_with = "de_epoch")]
        epoch: Option<u32>,
        #[serde(default, deserialize_with = "de_ipc")]
        ipc: Option<Ipcs>,
    },
    WarpedSlicer {
        #[serde(default, deserialize_with = "de_warm_up")]
        warm_up: Option<u32>,
        #[serde(default, deserialize_with = "de_sample")]
        sample: Option<u32>,
    },
    Maestro {
        #[serde(default, deserialize_with = "de_maestro_epoch")]
        epoch: Option<u32>,
        #[serde(default, deserialize_with = "de_ipc")]
        ipc: Option<Ipcs>,
    },
    Ccbp {
        #[serde(default, deserialize_with = "de_warm_up")]
        warm_up: Option<u32>,
        #[serde(default, deserialize_with = "de_sample")]
        sample: Option<u32>,
        #[serde(default, deserialize_with = "de_prior_lsk")]
        prior_lsk: Option<f64>,
    },
    Fixed {
        #[serde(deserialize_with = "de_tbs")]
        tbs: TbCounts,
        #[serde(default, deserialize_with = "de_noc")]
        noc: Option<TbCounts>,
    },
}

impl From<Written> for PolicyKind {
    fn from(w: Written) -> PolicyKind {
        match w {
            Written::Fcfs {} => PolicyKind::Fcfs,
            Written::Npq {} => PolicyKind::Npq,
            Written::Ppq { access } => PolicyKind::Ppq { access },
            Written::TimeSlice { slice_us } => PolicyKind::TimeSlice { slice_us },
            Written::Dss { tokens } => PolicyKind::Dss { tokens },
            Written::Mps { percentage } => PolicyKind::Mps { percentage },
            Written::Mig { instances } => PolicyKind::Mig { instances },
            Written::Spatial {} => PolicyKind::Spatial,
            Written::LeftOver {} => PolicyKind::LeftOver,
            Written::Smk { epoch, ipc } => PolicyKind::Smk { epoch, ipc },
            Written::WarpedSlicer { warm_up, sample } => {
                PolicyKind::WarpedSlicer { warm_up, sample }
            }
            Written::Maestro { epoch, ipc } => PolicyKind::Maestro { epoch, ipc },
            Written::Ccbp {
                warm_up,
                sample,
                prior_lsk,
            } => PolicyKind::Ccbp {
                warm_up,
                sample,
                prior_lsk,
            },
            Written::Fixed { tbs, noc } => PolicyKind::Fixed { tbs, noc },
        }
    }
}

/// The shortest and longest time slices, µs.
pub const SLICE_US_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1.0e7;

fn de_slice_us<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = f64::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`slice_us`: {}", e.trim_end()))
    })?;
    if !(v.is_finite() && SLICE_US_RANGE.contains(&v)) {
        return Err(serde::de::Error::custom(format!(
            "`slice_us` = {v} is out of range: a slice is 0.01 to 10^7 µs"
        )));
    }
    Ok(Some(v))
}

/// The most tokens a DSS process may be given.
pub const MAX_DSS_TOKENS: u32 = 1 << 16;

fn de_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = u32::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`tokens`: {}", e.trim_end()))
    })?;
    if v == 0 || v > MAX_DSS_TOKENS {
        return Err(serde::de::Error::custom(format!(
            "`tokens` = {v} is out of range: a process holds 1 to {MAX_DSS_TOKENS} tokens"
        )));
    }
    Ok(Some(v))
}

fn de_percentage<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = f64::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`percentage`: {}", e.trim_end()))
    })?;
    if !(v.is_finite() && v > 0.0 && v <= 100.0) {
        return Err(serde::de::Error::custom(format!(
            "`percentage` = {v} is out of range: an active-thread percentage is in (0, 100]"
        )));
    }
    Ok(Some(v))
}

/// The most MIG instances a GPU may be cut into (an instance has at least one SM; more
/// instances than SMs make as many as there are SMs).
pub const MAX_MIG_INSTANCES: u32 = 1024;

fn de_instances<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = u32::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`instances`: {}", e.trim_end()))
    })?;
    if v == 0 || v > MAX_MIG_INSTANCES {
        return Err(serde::de::Error::custom(format!(
            "`instances` = {v} is out of range: a GPU is cut into 1 to {MAX_MIG_INSTANCES} instances"
        )));
    }
    Ok(Some(v))
}

/// The longest Warped-Slicer warm-up or sample, core cycles.
pub const MAX_PROFILE_CYCLES: u32 = 1 << 24;

fn de_profile<'de, D: serde::Deserializer<'de>>(
    d: D,
    name: &str,
    min: u32,
) -> Result<Option<u32>, D::Error> {
    let v = u32::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`{name}`: {}", e.trim_end()))
    })?;
    if v < min || v > MAX_PROFILE_CYCLES {
        return Err(serde::de::Error::custom(format!(
            "`{name}` = {v} is out of range: {min} to {MAX_PROFILE_CYCLES} core cycles"
        )));
    }
    Ok(Some(v))
}

fn de_warm_up<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    de_profile(d, "warm_up", 0)
}

fn de_sample<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    de_profile(d, "sample", 1)
}

fn de_maestro_epoch<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    de_profile(d, "epoch", 2)
}

/// The highest priority CCBP may give latency-sensitive kernels.
pub const MAX_PRIOR_LSK: f64 = 1000.0;

fn de_prior_lsk<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = f64::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`prior_lsk`: {}", e.trim_end()))
    })?;
    if !(v.is_finite() && v > 0.0 && v <= MAX_PRIOR_LSK) {
        return Err(serde::de::Error::custom(format!(
            "`prior_lsk` = {v} is out of range: a priority is in (0, {MAX_PRIOR_LSK}]"
        )));
    }
    Ok(Some(v))
}

/// The longest SMK epoch, warp instructions per scheduler.
pub const MAX_SMK_EPOCH: u32 = 1 << 24;

fn de_epoch<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = u32::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`epoch`: {}", e.trim_end()))
    })?;
    if v == 0 || v > MAX_SMK_EPOCH {
        return Err(serde::de::Error::custom(format!(
            "`epoch` = {v} is out of range: an epoch is 1 to {MAX_SMK_EPOCH} warp instructions"
        )));
    }
    Ok(Some(v))
}

/// SMK's standalone IPCs: a list of numbers (a scenario's `ipc = [1.5, 0.5]`), or on the
/// command line, where commas separate parameters, numbers joined by `/` (`ipc=1.5/0.5`).
fn de_ipc<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Ipcs>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of numbers, or numbers joined by `/`")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Vec<f64>, A::Error> {
            let mut out = Vec::new();
            while let Some(x) = a.next_element::<f64>()? {
                out.push(x);
                if out.len() > MAX_CORUNNERS {
                    break;
                }
            }
            Ok(out)
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Vec<f64>, E> {
            s.split('/')
                .map(|x| {
                    x.trim()
                        .parse::<f64>()
                        .map_err(|_| E::custom(format!("`{x}` is not a number")))
                })
                .collect()
        }
        fn visit_f64<E: serde::de::Error>(self, x: f64) -> Result<Vec<f64>, E> {
            Ok(vec![x])
        }
        fn visit_i64<E: serde::de::Error>(self, x: i64) -> Result<Vec<f64>, E> {
            Ok(vec![x as f64])
        }
        fn visit_u64<E: serde::de::Error>(self, x: u64) -> Result<Vec<f64>, E> {
            Ok(vec![x as f64])
        }
    }
    let v = d.deserialize_any(V).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`ipc`: {}", e.trim_end()))
    })?;
    match Ipcs::new(&v) {
        Some(ipc) => Ok(Some(ipc)),
        None => Err(serde::de::Error::custom(format!(
            "`ipc` = {v:?} is out of range: 1 to {MAX_CORUNNERS} positive finite IPCs, one per process"
        ))),
    }
}

/// A fixed TB combination: a list of counts (a scenario's `tbs = [7, 4]`), or on the
/// command line numbers joined by `/` (`tbs=7/4`).
fn de_tbs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TbCounts, D::Error> {
    de_counts(d, "tbs", "TB count")
}

fn de_noc<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TbCounts>, D::Error> {
    de_counts(d, "noc", "request quota").map(Some)
}

/// A per-process list of positive counts (`key`, each a `unit`): a list of numbers, or
/// numbers joined by `/` (the command line's spelling).
fn de_counts<'de, D: serde::Deserializer<'de>>(
    d: D,
    key: &str,
    unit: &'static str,
) -> Result<TbCounts, D::Error> {
    struct V(&'static str);
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<i64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of {0}s, or {0}s joined by `/`", self.0)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Vec<i64>, A::Error> {
            let mut out = Vec::new();
            while let Some(x) = a.next_element::<i64>()? {
                out.push(x);
                if out.len() > MAX_CORUNNERS {
                    break;
                }
            }
            Ok(out)
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Vec<i64>, E> {
            s.split('/')
                .map(|x| {
                    x.trim()
                        .parse::<i64>()
                        .map_err(|_| E::custom(format!("`{x}` is not a {}", self.0)))
                })
                .collect()
        }
        fn visit_i64<E: serde::de::Error>(self, x: i64) -> Result<Vec<i64>, E> {
            Ok(vec![x])
        }
        fn visit_u64<E: serde::de::Error>(self, x: u64) -> Result<Vec<i64>, E> {
            Ok(vec![i64::try_from(x).unwrap_or(i64::MAX)])
        }
    }
    let v = d.deserialize_any(V(unit)).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`{key}`: {}", e.trim_end()))
    })?;
    let counts: Option<Vec<u32>> = v.iter().map(|&x| u32::try_from(x).ok()).collect();
    match counts.as_deref().and_then(TbCounts::new) {
        Some(t) => Ok(t),
        None => Err(serde::de::Error::custom(format!(
            "`{key}` = {v:?} is out of range: 1 to {MAX_CORUNNERS} {unit}s of at least 1, one per process"
        ))),
    }
}

/// What building a policy needs to know of the run.
#[derive(Clone, Debug)]
pub struct PolicyEnv {
    /// The time slice of [`PolicyKind::TimeSlice`] when it names none, µs.
    pub default_slice_us: f64,
    /// The core clock that turns µs into cycles.
    pub clock_mhz: f64,
    pub sm_count: u32,
    /// The priority of every process (GPU context) of the run, in order: DSS's shares.
    pub priorities: Vec<i32>,
}

impl PolicyKind {
    /// Every policy, with its parameters' defaults.
    pub const ALL: [PolicyKind; 13] = [
        PolicyKind::Fcfs,
        PolicyKind::Npq,
        PolicyKind::Ppq {
            access: PpqAccess::Shared,
        },
        PolicyKind::TimeSlice { slice_us: None },
        PolicyKind::Dss { tokens: None },
        PolicyKind::Mps { percentage: None },
        PolicyKind::Mig { instances: None },
        PolicyKind::Spatial,
        PolicyKind::LeftOver,
        PolicyKind::Smk {
            epoch: None,
            ipc: None,
        },
        PolicyKind::WarpedSlicer {
            warm_up: None,
            sample: None,
        },
        PolicyKind::Maestro {
            epoch: None,
            ipc: None,
        },
        PolicyKind::Ccbp {
            warm_up: None,
            sample: None,
            prior_lsk: None,
        },
    ];

    /// The co-running schemes ([`crate::corun`]), with their parameters' defaults.
    pub const CORUN: [PolicyKind; 6] = [
        PolicyKind::Spatial,
        PolicyKind::LeftOver,
        PolicyKind::Smk {
            epoch: None,
            ipc: None,
        },
        PolicyKind::WarpedSlicer {
            warm_up: None,
            sample: None,
        },
        PolicyKind::Maestro {
            epoch: None,
            ipc: None,
        },
        PolicyKind::Ccbp {
            warm_up: None,
            sample: None,
            prior_lsk: None,
        },
    ];

    /// The policy for a run described by `env`.
    pub fn build(self, env: &PolicyEnv) -> Box<dyn Policy> {
        match self {
            PolicyKind::Fcfs => Box::new(Fcfs),
            PolicyKind::Npq => Box::new(Npq),
            PolicyKind::Ppq { access } => Box::new(Ppq { access }),
            PolicyKind::TimeSlice { slice_us } => {
                let us = slice_us.unwrap_or(env.default_slice_us);
                Box::new(TimeSlice::new((us * env.clock_mhz).round() as u64))
            }
            PolicyKind::Dss { tokens } => {
                Box::new(crate::dss::Dss::new(env.sm_count, &env.priorities, tokens))
            }
            PolicyKind::Mps { percentage } => Box::new(crate::mps::Mps::new(
                env.sm_count,
                percentage.unwrap_or(100.0),
            )),
            PolicyKind::Mig { instances } => Box::new(crate::mig::Mig::new(
                env.sm_count,
                crate::mig::instances_for(instances, env.priorities.len()),
            )),
            PolicyKind::Spatial => Box::new(Corun::new(Scheme::Spatial)),
            PolicyKind::LeftOver => Box::new(Corun::new(Scheme::LeftOver)),
            PolicyKind::Smk { epoch, ipc } => Box::new(Corun::new(Scheme::Smk {
                epoch: epoch.unwrap_or(SMK_EPOCH),
                ipc,
            })),
            PolicyKind::WarpedSlicer { warm_up, sample } => {
                Box::new(Corun::new(Scheme::WarpedSlicer {
                    warm_up: warm_up.unwrap_or(crate::corun::WS_WARM_UP),
                    sample: sample.unwrap_or(crate::corun::WS_SAMPLE),
                }))
            }
            PolicyKind::Maestro { epoch, ipc } => Box::new(Corun::new(Scheme::Maestro {
                epoch: epoch.unwrap_or(crate::corun::MAESTRO_EPOCH),
                ipc,
            })),
            PolicyKind::Ccbp {
                warm_up,
                sample,
                prior_lsk,
            } => Box::new(Corun::new(Scheme::Ccbp {
                warm_up: warm_up.unwrap_or(crate::corun::WS_WARM_UP),
                sample: sample.unwrap_or(crate::corun::WS_SAMPLE),
                prior_lsk: prior_lsk.unwrap_or(1.0),
            })),
            PolicyKind::Fixed { tbs, noc } => Box::new(Corun::new(Scheme::Fixed(tbs, noc))),
        }
    }

    /// The policy's name (without its parameters; `Display` adds those it was given).
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Fcfs => "fcfs",
            PolicyKind::Npq => "npq",
            PolicyKind::Ppq { .. } => "ppq",
            PolicyKind::TimeSlice { .. } => "time-slice",
            PolicyKind::Dss { .. } => "dss",
            PolicyKind::Mps { .. } => "mps",
            PolicyKind::Mig { .. } => "mig",
            PolicyKind::Spatial => "spatial",
            PolicyKind::LeftOver => "left-over",
            PolicyKind::Smk { .. } => "smk",
            PolicyKind::WarpedSlicer { .. } => "warped-slicer",
            PolicyKind::Maestro { .. } => "maestro",
            PolicyKind::Ccbp { .. } => "ccbp",
            PolicyKind::Fixed { .. } => "fixed",
        }
    }
}

/// `name[:key=value,...]`, the parameters it was given only: the form the command line
/// reads back.
impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())?;
        match *self {
            PolicyKind::TimeSlice { slice_us: Some(us) } => write!(f, ":slice_us={us}"),
            PolicyKind::Dss { tokens: Some(t) } => write!(f, ":tokens={t}"),
            PolicyKind::Mps {
                percentage: Some(p),
            } => write!(f, ":percentage={p}"),
            PolicyKind::Mig { instances: Some(n) } => write!(f, ":instances={n}"),
            PolicyKind::Ppq {
                access: PpqAccess::Exclusive,
            } => write!(f, ":access=exclusive"),
            PolicyKind::Smk { epoch, ipc } | PolicyKind::Maestro { epoch, ipc } => {
                let mut sep = ':';
                if let Some(e) = epoch {
                    write!(f, "{sep}epoch={e}")?;
                    sep = ',';
                }
                if let Some(ipc) = ipc {
                    let list: Vec<String> = ipc.as_slice().iter().map(f64::to_string).collect();
                    write!(f, "{sep}ipc={}", list.join("/"))?;
                }
                Ok(())
            }
            PolicyKind::WarpedSlicer { warm_up, sample }
            | PolicyKind::Ccbp {
                warm_up, sample, ..
            } => {
                let mut sep = ':';
                if let Some(w) = warm_up {
                    write!(f, "{sep}warm_up={w}")?;
                    sep = ',';
                }
                if let Some(s) = sample {
                    write!(f, "{sep}sample={s}")?;
                    sep = ',';
                }
                if let PolicyKind::Ccbp {
                    prior_lsk: Some(p), ..
                } = *self
                {
                    write!(f, "{sep}prior_lsk={p}")?;
                }
                Ok(())
            }
            PolicyKind::Fixed { tbs, noc } => {
                let list = |c: &TbCounts| {
                    let v: Vec<String> = c.as_slice().iter().map(u32::to_string).collect();
                    v.join("/")
                };
                write!(f, ":tbs={}", list(&tbs))?;
                if let Some(noc) = noc {
                    write!(f, ",noc={}", list(&noc))?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// First come, first served.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fcfs;

/// Non-preemptive priority queues.
#[derive(Clone, Copy, Debug, Default)]
pub struct Npq;

/// The best waiting command by `key` (smallest first), ties to the lower context.
pub(crate) fn pick_waiting<K: Ord>(
    waiting: &[Waiting],
    key: impl Fn(&Waiting) -> K,
) -> Option<ContextId> {
    waiting
        .iter()
        .min_by_key(|w| (key(w), w.context))
        .map(|w| w.context)
}

/// Gives `sm` to the best active kernel with TBs to issue by `key` (smallest first; ties to
/// the earlier activated).
fn give<K: Ord>(sm: SmId, tables: &mut Tables, key: impl Fn(&Ksr) -> K) {
    let best = tables
        .active()
        .iter()
        .enumerate()
        .filter(|(_, &k)| tables.ksr(k).has_work())
        .min_by_key(|(order, &k)| (key(tables.ksr(k)), *order))
        .map(|(_, &k)| k);
    if let Some(k) = best {
        tables.assign(sm, k);
    }
}

/// Gives every idle SM, in index order, to the best kernel with work.
fn fill_idle<K: Ord>(tables: &mut Tables, key: impl Fn(&Ksr) -> K + Copy) {
    for sm in tables.idle_sms() {
        give(sm, tables, key);
    }
}

fn fcfs_key(k: &Ksr) -> (u64, u64) {
    (k.arrived_at, k.activated_at)
}

fn npq_key(k: &Ksr) -> (std::cmp::Reverse<i32>, u64, u64) {
    (std::cmp::Reverse(k.priority), k.arrived_at, k.activated_at)
}

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        fill_idle(tables, fcfs_key);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        give(sm, tables, fcfs_key);
    }
}

impl Policy for Npq {
    fn name(&self) -> &'static str {
        "npq"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| (std::cmp::Reverse(w.priority), w.arrived_at))
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        fill_idle(tables, npq_key);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        give(sm, tables, npq_key);
    }
}

/// Who may use the SMs while a high-priority kernel is active (papers/tanasic-thesis
/// §5.3.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PpqAccess {
    /// Only kernels of the highest active priority get SMs (Figure 5.5a).
    Exclusive,
    /// An idle SM goes to the best kernel with TBs to issue (Figure 5.5b).
    #[default]
    Shared,
}

impl PpqAccess {
    fn is_default(&self) -> bool {
        *self == PpqAccess::default()
    }
}

/// Preemptive priority queues.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ppq {
    pub access: PpqAccess,
}

impl Ppq {
    /// Reserves every SM running a kernel of lower priority than the best kernel that has
    /// TBs to issue, for that kernel.
    fn preempt_lower(tables: &mut Tables) {
        let best = tables
            .active()
            .iter()
            .copied()
            .filter(|&k| tables.ksr(k).has_work())
            .min_by_key(|&k| npq_key(tables.ksr(k)));
        let Some(best) = best else {
            return;
        };
        let prio = tables.ksr(best).priority;
        for sm in (0..tables.sm_count()).map(SmId) {
            let e = *tables.sm(sm);
            let lower = e.kernel.is_some_and(|k| tables.ksr(k).priority < prio);
            let taken = e.state == crate::SmState::Reserved
                && e.next.is_some_and(|n| tables.ksr(n).priority >= prio);
            if e.state != crate::SmState::Idle && lower && !taken {
                tables.reserve(sm, best);
            }
        }
    }
}

impl Ppq {
    /// Gives idle `sm` to the best kernel with TBs to issue; with exclusive access, only to
    /// one of the highest priority among the active kernels.
    fn give(&self, sm: SmId, tables: &mut Tables) {
        let top = tables
            .active()
            .iter()
            .map(|&k| tables.ksr(k).priority)
            .max();
        let allowed = |k: &Ksr| self.access == PpqAccess::Shared || Some(k.priority) == top;
        let best = tables
            .active()
            .iter()
            .enumerate()
            .filter(|(_, &k)| tables.ksr(k).has_work() && allowed(tables.ksr(k)))
            .min_by_key(|(order, &k)| (npq_key(tables.ksr(k)), *order))
            .map(|(_, &k)| k);
        if let Some(k) = best {
            tables.assign(sm, k);
        }
    }
}

impl Policy for Ppq {
    fn name(&self) -> &'static str {
        "ppq"
    }
    /// A higher priority takes SMs from lower ones (§5.2.4).
    fn may_preempt_on_arrival(&self, arriving: i32, running: i32) -> bool {
        arriving > running
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| (std::cmp::Reverse(w.priority), w.arrived_at))
    }
    fn on_kernel_activated(&mut self, _: KernelSlot, tables: &mut Tables) {
        for sm in tables.idle_sms() {
            self.give(sm, tables);
        }
        Ppq::preempt_lower(tables);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        self.give(sm, tables);
    }
    /// With exclusive access, SMs left idle while a higher priority was active go to the
    /// kernels now at the top.
    fn on_kernel_finished(&mut self, tables: &mut Tables) {
        for sm in tables.idle_sms() {
            self.give(sm, tables);
        }
    }
}

/// Time slicing between contexts.
#[derive(Clone, Debug)]
pub struct TimeSlice {
    slice: u64,
    /// The context whose turn it is, and when its turn began.
    current: Option<ContextId>,
    since: u64,
}

impl TimeSlice {
    pub fn new(slice_cycles: u64) -> TimeSlice {
        TimeSlice {
            slice: slice_cycles.max(1),
            current: None,
            since: 0,
        }
    }

    /// The key that puts the current context's kernels first, then arrival order.
    fn key(&self) -> impl Fn(&Ksr) -> (bool, u64, u64) + Copy + '_ {
        move |k: &Ksr| {
            (
                Some(k.context) != self.current,
                k.arrived_at,
                k.activated_at,
            )
        }
    }
}

impl Policy for TimeSlice {
    fn name(&self) -> &'static str {
        "time-slice"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        pick_waiting(waiting, |w| w.arrived_at)
    }
    fn on_kernel_activated(&mut self, k: KernelSlot, tables: &mut Tables) {
        if self.current.is_none() {
            self.current = Some(tables.ksr(k).context);
            self.since = tables.now();
        }
        let key = self.key();
        fill_idle(tables, key);
    }
    fn on_sm_idle(&mut self, sm: SmId, tables: &mut Tables) {
        let key = self.key();
        give(sm, tables, key);
    }
    fn on_cycle(&mut self, tables: &mut Tables) {
        if tables.now() < self.since + self.slice {
            return;
        }
        // The contexts with work, in order; the next one after the current takes its turn.
        let mut contexts: Vec<ContextId> = tables
            .active()
            .iter()
            .filter(|&&k| tables.ksr(k).has_work())
            .map(|&k| tables.ksr(k).context)
            .collect();
        contexts.sort_unstable();
        contexts.dedup();
        let next = match self.current {
            Some(c) => contexts
                .iter()
                .copied()
                .find(|&x| x > c)
                .or_else(|| contexts.first().copied()),
            None => contexts.first().copied(),
        };
        self.since = tables.now();
        let Some(next) = next else {
            return;
        };
        if Some(next) == self.current {
            return;
        }
        self.current = Some(next);
        let Some(k) = tables
            .active()
            .iter()
            .copied()
            .find(|&k| tables.ksr(k).context == next && tables.ksr(k).has_work())
        else {
            return;
        };
        for sm in (0..tables.sm_count()).map(SmId) {
            let e = *tables.sm(sm);
            let other = e.kernel.is_some_and(|x| tables.ksr(x).context != next);
            // An SM draining for a stream priority of the old context is taken too.
            let running = e.state == crate::SmState::Running || e.yielding;
            if running && other {
                tables.reserve(sm, k);
            }
        }
    }
}
