//! The mechanisms by name, with their parameters: what a scenario file's
//! `[scheduler] mechanism` and the command line's `--mechanism` choose.
//!
//! One spelling everywhere: the kebab-case name (`flush-strict`, `lightweight-in-place`) on
//! the command line, in scenario files and in every report. [`MechanismKind`] is a serde
//! enum tagged by `kind`, so a scenario writes either the name alone (the parameters'
//! defaults) or a table, `{ kind = "chimera", deadline_us = 10 }`; a field the mechanism
//! does not have is an error naming it, and so is a value out of range. The snake_case
//! spellings of earlier scenario files (`flush_strict`) are accepted as deprecated aliases.
//! [`MechanismKind`]'s `Display` writes the command line's form, `name[:key=value,...]`,
//! giving only the parameters that differ from their defaults.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::{
    Chimera, Ckpt, Compression, Drain, Flush, Mechanism, Pep, PepConfig, RoutineDesign,
    RoutineSwitch, Switch, SwitchConfig, CKPT_EVERY, PEP_PREDICTED_LAUNCH_US,
};

/// The preemption deadline [`MechanismKind::Chimera`] works to unless told otherwise, µs
/// (papers/li-pep §4 runs Chimera at 5, 10 and 15 µs).
pub const CHIMERA_DEADLINE_US: f64 = 15.0;

/// The compressor latency of the compressing switch designs unless told otherwise, core
/// cycles (papers/lin-lightweight assumes 2, after Warped-Compression).
pub const COMPRESSOR_LATENCY: u64 = SwitchConfig::LIGHTWEIGHT.compressor_latency;

/// The longest deadline a Chimera may be given, µs (ten simulated seconds).
const MAX_DEADLINE_US: f64 = 1.0e7;
/// The longest compressor latency a switch may be given, core cycles.
const MAX_COMPRESSOR_LATENCY: u64 = 1_000_000;

/// A preemption mechanism and its parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", from = "Written")]
pub enum MechanismKind {
    /// SM draining.
    #[default]
    Drain,
    /// Flushing of strictly idempotent TBs.
    FlushStrict,
    /// Flushing of relaxed-idempotent TBs (pointer arguments assumed not to overlap).
    FlushRelaxed,
    /// Context switch saving every allocated register.
    Baseline,
    /// Context switch saving the registers live at each warp's instruction.
    Live,
    /// At preemption points, the registers their liveness vectors name, uncompressed
    /// ("Live" in papers/lin-lightweight Figure 14).
    PointsLive,
    /// Lightweight context switching (papers/lin-lightweight): at preemption points, the
    /// registers their liveness vectors name, compressed at warp level, through the save
    /// pipeline; `compressor_latency` is [`SwitchConfig::compressor_latency`] (default
    /// [`COMPRESSOR_LATENCY`]).
    Lightweight { compressor_latency: u64 },
    /// Lightweight, compressing at TB level where a TB stops at a `bar.pp` (§III-C).
    LightweightTb { compressor_latency: u64 },
    /// Lightweight with in-place context switching (§III-A): only what the incoming kernel
    /// needs leaves the SM.
    LightweightInPlace { compressor_latency: u64 },
    /// Chimera: per TB, drain, flush or switch, whichever meets a deadline of `deadline_us`
    /// (default [`CHIMERA_DEADLINE_US`]) at the least estimated cost.
    Chimera { deadline_us: f64 },
    /// CS-Defer (papers/ji-ctxback §II-B): each warp runs on to its deferral point, saves
    /// the live registers there through a routine, and resumes there.
    CsDefer,
    /// CTXBack (papers/ji-ctxback §III–IV): each warp saves the context of its flashback
    /// point through its dedicated preemption routine, and resumes through its resume
    /// routine.
    #[serde(rename = "ctxback")]
    CtxBack,
    /// CTXBack+CS-Defer (§IV-C): per instruction, CTXBack's routines or CS-Defer's,
    /// whichever is estimated to preempt faster.
    #[serde(rename = "ctxback-cs-defer")]
    CtxBackCsDefer,
    /// Chimera+dirty (papers/li-pep §4, PEP's baseline): Chimera whose switches save only
    /// the registers written since the TB was placed.
    ChimeraDirty { deadline_us: f64 },
    /// PEP (papers/li-pep §3): base checkpoints at the host's launch call for TBs predicted
    /// to be preempted while running (`predicted_launch_us`, default
    /// [`PEP_PREDICTED_LAUNCH_US`]), incremental ones at the request.
    Pep { predicted_launch_us: f64 },
    /// PEP+in-place: the incremental checkpoint stays on the SM where the incoming kernel
    /// leaves room.
    PepInPlace { predicted_launch_us: f64 },
    /// CKPT (papers/ji-ctxback §V): a checkpoint of the live registers each time a warp has
    /// entered the same basic block `every` times (default [`CKPT_EVERY`]); a preemption
    /// rolls the TB back to it. `least_live` (the default, the paper's): each warp is
    /// captured at its block's least-live instruction ([`crate::ckpt::CkptPass`]);
    /// `false`: wherever it stands when the checkpoint is due (for comparison).
    Ckpt { every: u32, least_live: bool },
}

/// How a mechanism is written: [`MechanismKind`] with every variant a struct, so that a
/// parameter given to a mechanism that has none is refused (serde ignores the other fields
/// of an internally tagged unit variant), and the parameters' defaults and ranges.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum Written {
    Drain {},
    #[serde(alias = "flush_strict")]
    FlushStrict {},
    #[serde(alias = "flush_relaxed")]
    FlushRelaxed {},
    Baseline {},
    Live {},
    #[serde(alias = "points_live")]
    PointsLive {},
    Lightweight {
        #[serde(
            default = "compressor_latency",
            deserialize_with = "de_compressor_latency"
        )]
        compressor_latency: u64,
    },
    #[serde(alias = "lightweight_tb")]
    LightweightTb {
        #[serde(
            default = "compressor_latency",
            deserialize_with = "de_compressor_latency"
        )]
        compressor_latency: u64,
    },
    #[serde(alias = "lightweight_in_place")]
    LightweightInPlace {
        #[serde(
            default = "compressor_latency",
            deserialize_with = "de_compressor_latency"
        )]
        compressor_latency: u64,
    },
    Chimera {
        #[serde(default = "deadline_us", deserialize_with = "de_deadline_us")]
        deadline_us: f64,
    },
    CsDefer {},
    #[serde(rename = "ctxback")]
    CtxBack {},
    #[serde(rename = "ctxback-cs-defer", alias = "ctxback+cs-defer")]
    CtxBackCsDefer {},
    #[serde(alias = "chimera+dirty")]
    ChimeraDirty {
        #[serde(default = "deadline_us", deserialize_with = "de_deadline_us")]
        deadline_us: f64,
    },
    Pep {
        #[serde(
            default = "predicted_launch_us",
            deserialize_with = "de_predicted_launch_us"
        )]
        predicted_launch_us: f64,
    },
    #[serde(alias = "pep+in-place")]
    PepInPlace {
        #[serde(
            default = "predicted_launch_us",
            deserialize_with = "de_predicted_launch_us"
        )]
        predicted_launch_us: f64,
    },
    Ckpt {
        #[serde(default = "ckpt_every", deserialize_with = "de_ckpt_every")]
        every: u32,
        #[serde(default = "least_live")]
        least_live: bool,
    },
}

impl From<Written> for MechanismKind {
    fn from(w: Written) -> MechanismKind {
        match w {
            Written::Drain {} => MechanismKind::Drain,
            Written::FlushStrict {} => MechanismKind::FlushStrict,
            Written::FlushRelaxed {} => MechanismKind::FlushRelaxed,
            Written::Baseline {} => MechanismKind::Baseline,
            Written::Live {} => MechanismKind::Live,
            Written::PointsLive {} => MechanismKind::PointsLive,
            Written::Lightweight { compressor_latency } => {
                MechanismKind::Lightweight { compressor_latency }
            }
            Written::LightweightTb { compressor_latency } => {
                MechanismKind::LightweightTb { compressor_latency }
            }
            Written::LightweightInPlace { compressor_latency } => {
                MechanismKind::LightweightInPlace { compressor_latency }
            }
            Written::Chimera { deadline_us } => MechanismKind::Chimera { deadline_us },
            Written::CsDefer {} => MechanismKind::CsDefer,
            Written::CtxBack {} => MechanismKind::CtxBack,
            Written::CtxBackCsDefer {} => MechanismKind::CtxBackCsDefer,
            Written::ChimeraDirty { deadline_us } => MechanismKind::ChimeraDirty { deadline_us },
            Written::Pep {
                predicted_launch_us,
            } => MechanismKind::Pep {
                predicted_launch_us,
            },
            Written::PepInPlace {
                predicted_launch_us,
            } => MechanismKind::PepInPlace {
                predicted_launch_us,
            },
            Written::Ckpt { every, least_live } => MechanismKind::Ckpt { every, least_live },
        }
    }
}

fn least_live() -> bool {
    true
}

fn compressor_latency() -> u64 {
    COMPRESSOR_LATENCY
}

fn deadline_us() -> f64 {
    CHIMERA_DEADLINE_US
}

fn predicted_launch_us() -> f64 {
    PEP_PREDICTED_LAUNCH_US
}

fn ckpt_every() -> u32 {
    CKPT_EVERY
}

fn de_ckpt_every<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v: u32 = param(d, "every")?;
    if !(1..=u32::from(u16::MAX)).contains(&v) {
        return Err(serde::de::Error::custom(format!(
            "`every` = {v} is out of range: a checkpoint interval is 1 to 65535 block entries"
        )));
    }
    Ok(v)
}

/// A parameter's value, its type error named after the parameter.
fn param<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D, name: &str) -> Result<T, D::Error> {
    T::deserialize(d).map_err(|e| {
        let e = e.to_string();
        serde::de::Error::custom(format!("`{name}`: {}", e.trim_end()))
    })
}

fn de_compressor_latency<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v: u64 = param(d, "compressor_latency")?;
    if v > MAX_COMPRESSOR_LATENCY {
        return Err(serde::de::Error::custom(format!(
            "`compressor_latency` = {v} is out of range: at most {MAX_COMPRESSOR_LATENCY} cycles"
        )));
    }
    Ok(v)
}

fn de_deadline_us<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v: f64 = param(d, "deadline_us")?;
    if !(v.is_finite() && v > 0.0 && v <= MAX_DEADLINE_US) {
        return Err(serde::de::Error::custom(format!(
            "`deadline_us` = {v} is out of range: a deadline is more than 0 and at most \
             10^7 µs"
        )));
    }
    Ok(v)
}

fn de_predicted_launch_us<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v: f64 = param(d, "predicted_launch_us")?;
    if !(v.is_finite() && (0.0..=MAX_DEADLINE_US).contains(&v)) {
        return Err(serde::de::Error::custom(format!(
            "`predicted_launch_us` = {v} is out of range: a launch time is at least 0 and at \
             most 10^7 µs"
        )));
    }
    Ok(v)
}

impl MechanismKind {
    /// Every mechanism, with its parameters' defaults.
    pub const ALL: [MechanismKind; 17] = [
        MechanismKind::Drain,
        MechanismKind::FlushStrict,
        MechanismKind::FlushRelaxed,
        MechanismKind::Baseline,
        MechanismKind::Live,
        MechanismKind::PointsLive,
        MechanismKind::Lightweight {
            compressor_latency: COMPRESSOR_LATENCY,
        },
        MechanismKind::LightweightTb {
            compressor_latency: COMPRESSOR_LATENCY,
        },
        MechanismKind::LightweightInPlace {
            compressor_latency: COMPRESSOR_LATENCY,
        },
        MechanismKind::Chimera {
            deadline_us: CHIMERA_DEADLINE_US,
        },
        MechanismKind::CsDefer,
        MechanismKind::CtxBack,
        MechanismKind::CtxBackCsDefer,
        MechanismKind::ChimeraDirty {
            deadline_us: CHIMERA_DEADLINE_US,
        },
        MechanismKind::Pep {
            predicted_launch_us: PEP_PREDICTED_LAUNCH_US,
        },
        MechanismKind::PepInPlace {
            predicted_launch_us: PEP_PREDICTED_LAUNCH_US,
        },
        MechanismKind::Ckpt {
            every: CKPT_EVERY,
            least_live: true,
        },
    ];

    /// [`MechanismKind::Lightweight`] with its defaults.
    pub const LIGHTWEIGHT: MechanismKind = MechanismKind::ALL[6];
    /// [`MechanismKind::LightweightTb`] with its defaults.
    pub const LIGHTWEIGHT_TB: MechanismKind = MechanismKind::ALL[7];
    /// [`MechanismKind::LightweightInPlace`] with its defaults.
    pub const LIGHTWEIGHT_IN_PLACE: MechanismKind = MechanismKind::ALL[8];
    /// [`MechanismKind::Chimera`] with its defaults.
    pub const CHIMERA: MechanismKind = MechanismKind::ALL[9];
    /// [`MechanismKind::ChimeraDirty`] with its defaults.
    pub const CHIMERA_DIRTY: MechanismKind = MechanismKind::ALL[13];
    /// [`MechanismKind::Pep`] with its defaults.
    pub const PEP: MechanismKind = MechanismKind::ALL[14];
    /// [`MechanismKind::PepInPlace`] with its defaults.
    pub const PEP_IN_PLACE: MechanismKind = MechanismKind::ALL[15];
    /// [`MechanismKind::Ckpt`] with its defaults.
    pub const CKPT: MechanismKind = MechanismKind::ALL[16];

    /// The mechanism, ready for a framework; it carries the kernel pass it needs
    /// ([`Mechanism::kernel_pass`]).
    pub fn build(self) -> Box<dyn Mechanism> {
        let name = self.name();
        let compressing = |config: SwitchConfig, compressor_latency| {
            Box::new(Switch::new(
                name,
                SwitchConfig {
                    compressor_latency,
                    ..config
                },
            ))
        };
        match self {
            MechanismKind::Drain => Box::new(Drain::default()),
            MechanismKind::FlushStrict => Box::new(Flush::new(false)),
            MechanismKind::FlushRelaxed => Box::new(Flush::new(true)),
            MechanismKind::Baseline => Box::new(Switch::new(name, SwitchConfig::BASELINE)),
            MechanismKind::Live => Box::new(Switch::new(name, SwitchConfig::LIVE)),
            MechanismKind::PointsLive => Box::new(Switch::new(name, SwitchConfig::POINTS_LIVE)),
            MechanismKind::Lightweight { compressor_latency } => {
                compressing(SwitchConfig::LIGHTWEIGHT, compressor_latency)
            }
            MechanismKind::LightweightTb { compressor_latency } => compressing(
                SwitchConfig {
                    compression: Compression::Tb,
                    ..SwitchConfig::LIGHTWEIGHT
                },
                compressor_latency,
            ),
            MechanismKind::LightweightInPlace { compressor_latency } => compressing(
                SwitchConfig {
                    in_place: true,
                    ..SwitchConfig::LIGHTWEIGHT
                },
                compressor_latency,
            ),
            MechanismKind::Chimera { deadline_us } => Box::new(Chimera::new(deadline_us)),
            MechanismKind::CsDefer => Box::new(RoutineSwitch::new(RoutineDesign::CsDefer)),
            MechanismKind::CtxBack => Box::new(RoutineSwitch::new(RoutineDesign::CtxBack)),
            MechanismKind::CtxBackCsDefer => {
                Box::new(RoutineSwitch::new(RoutineDesign::CtxBackCsDefer))
            }
            MechanismKind::ChimeraDirty { deadline_us } => Box::new(Chimera::dirty(deadline_us)),
            MechanismKind::Pep {
                predicted_launch_us,
            } => Box::new(Pep::new(PepConfig {
                predicted_launch_us,
                in_place: false,
            })),
            MechanismKind::PepInPlace {
                predicted_launch_us,
            } => Box::new(Pep::new(PepConfig {
                predicted_launch_us,
                in_place: true,
            })),
            MechanismKind::Ckpt { every, least_live } => Box::new(Ckpt::new(every, least_live)),
        }
    }

    /// The mechanism's name, as the command line, scenario files and reports write it
    /// (without its parameters; `Display` adds those that differ from their defaults).
    pub fn name(self) -> &'static str {
        match self {
            MechanismKind::Drain => "drain",
            MechanismKind::FlushStrict => "flush-strict",
            MechanismKind::FlushRelaxed => "flush-relaxed",
            MechanismKind::Baseline => "baseline",
            MechanismKind::Live => "live",
            MechanismKind::PointsLive => "points-live",
            MechanismKind::Lightweight { .. } => "lightweight",
            MechanismKind::LightweightTb { .. } => "lightweight-tb",
            MechanismKind::LightweightInPlace { .. } => "lightweight-in-place",
            MechanismKind::Chimera { .. } => "chimera",
            MechanismKind::CsDefer => RoutineDesign::CsDefer.name(),
            MechanismKind::CtxBack => RoutineDesign::CtxBack.name(),
            MechanismKind::CtxBackCsDefer => RoutineDesign::CtxBackCsDefer.name(),
            MechanismKind::ChimeraDirty { .. } => "chimera-dirty",
            MechanismKind::Pep { .. } => "pep",
            MechanismKind::PepInPlace { .. } => "pep-in-place",
            MechanismKind::Ckpt { .. } => "ckpt",
        }
    }
}

/// `name[:key=value,...]`, the parameters that differ from their defaults only: the form
/// the command line reads back.
impl fmt::Display for MechanismKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        match *self {
            MechanismKind::Lightweight { compressor_latency }
            | MechanismKind::LightweightTb { compressor_latency }
            | MechanismKind::LightweightInPlace { compressor_latency }
                if compressor_latency != COMPRESSOR_LATENCY =>
            {
                write!(f, ":compressor_latency={compressor_latency}")
            }
            MechanismKind::Chimera { deadline_us }
            | MechanismKind::ChimeraDirty { deadline_us }
                if deadline_us != CHIMERA_DEADLINE_US =>
            {
                write!(f, ":deadline_us={deadline_us}")
            }
            MechanismKind::Pep {
                predicted_launch_us,
            }
            | MechanismKind::PepInPlace {
                predicted_launch_us,
            } if predicted_launch_us != PEP_PREDICTED_LAUNCH_US => {
                write!(f, ":predicted_launch_us={predicted_launch_us}")
            }
            MechanismKind::Ckpt { every, least_live } if every != CKPT_EVERY || !least_live => {
                let mut params = Vec::new();
                if every != CKPT_EVERY {
                    params.push(format!("every={every}"));
                }
                if !least_live {
                    params.push("least_live=false".to_string());
                }
                write!(f, ":{}", params.join(","))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mechanisms that stop at preemption points, or save what their liveness vectors
    /// name, carry the points pass, and the routine switches their routines pass; the
    /// others leave the kernels as allocated.
    #[test]
    fn the_mechanisms_that_need_a_pass_carry_it() {
        for m in MechanismKind::ALL {
            let pass = match m {
                MechanismKind::PointsLive
                | MechanismKind::Lightweight { .. }
                | MechanismKind::LightweightTb { .. }
                | MechanismKind::LightweightInPlace { .. } => Some("preemption-points"),
                MechanismKind::CsDefer => Some("cs-defer-routines"),
                MechanismKind::CtxBack => Some("ctxback-routines"),
                MechanismKind::CtxBackCsDefer => Some("ctxback-cs-defer-routines"),
                MechanismKind::Ckpt {
                    least_live: true, ..
                } => Some("ckpt-places"),
                _ => None,
            };
            assert_eq!(
                m.build().kernel_pass().map(|p| p.0.name().to_string()),
                pass.map(String::from),
                "{m}"
            );
        }
        // CKPT taking its checkpoints wherever the warps stand needs no marks.
        let anywhere = MechanismKind::Ckpt {
            every: CKPT_EVERY,
            least_live: false,
        };
        assert!(anywhere.build().kernel_pass().is_none());
    }

    /// CKPT's parameters are written back only where they differ from the defaults.
    #[test]
    fn ckpt_writes_the_parameters_it_changes() {
        let ckpt = |every, least_live| MechanismKind::Ckpt { every, least_live }.to_string();
        assert_eq!(ckpt(CKPT_EVERY, true), "ckpt");
        assert_eq!(ckpt(4, true), "ckpt:every=4");
        assert_eq!(ckpt(CKPT_EVERY, false), "ckpt:least_live=false");
        assert_eq!(ckpt(4, false), "ckpt:every=4,least_live=false");
    }
}
