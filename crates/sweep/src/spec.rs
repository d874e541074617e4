//! The sweep file: which points a sweep runs, checked when the file is read.
//!
//! ```toml
//! description = "suite kernels at small on three presets, two seeds"
//! threads = 1                    # SM threads of each point's run (default 1)
//!
//! [fixed]                        # fields every point has
//! size = "small"
//!
//! [grid]                         # every combination of these lists
//! gpu = ["gtx480", "k20c", "a100"]
//! seed = [1, 2]
//!
//! [[point]]                      # a list of points, each crossed with the grid
//! kernel = "reduce"
//! [[point]]
//! kernel = "scan"
//! scheduler = "gto"
//! ```
//!
//! A scenario sweep names `scenario` (a path from the sweep file's folder) instead:
//!
//! ```toml
//! [fixed]
//! scenario = "../scenarios/priority.toml"
//! [grid]
//! policy = ["fcfs", "npq", "ppq"]
//! mechanism = ["drain", "live"]
//! "scenario.process.2.arrival_us" = [2.0, 20.0]
//! ```
//!
//! A point runs a suite kernel's host program (`kernel`, as `switchyard run`) or a scenario
//! (`scenario`, as `switchyard scenario`), never both. Its fields ([`FIELDS`]): `gpu` (a preset
//! or a configuration file), `scheduler`, `size`, `seed` (for a scenario: of each of its
//! processes that runs a suite kernel), `target` (kernels), `policy`, `mechanism`,
//! `sharing`, `time_slice_us`, `alone` (scenarios; `alone = false` skips the runs alone
//! behind NTT, ANTT, STP and fairness), `max_cycles`, and
//! `scenario.PATH = VALUE`, which sets any field of the scenario file (`PATH` dotted, a
//! number indexing an array of tables: `scenario.process.1.arrival_us`).
//!
//! Invariants: every error names the file, the line and the field; a point's fields are
//! checked (names, values, which kind of point may have them) before anything runs; the
//! points come in a fixed order (the list's, then the grid's keys sorted, the last varying
//! fastest), so a sweep's point numbers do not change from run to run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// The fields a point may have (besides `scenario.PATH`).
pub const FIELDS: &[&str] = &[
    "kernel",
    "scenario",
    "gpu",
    "scheduler",
    "size",
    "seed",
    "target",
    "policy",
    "mechanism",
    "sharing",
    "time_slice_us",
    "alone",
    "max_cycles",
];

/// Fields only a scenario point may have.
const SCENARIO_ONLY: &[&str] = &["policy", "mechanism", "sharing", "time_slice_us", "alone"];
/// Fields only a kernel point may have.
const KERNEL_ONLY: &[&str] = &["target"];

/// An error in a sweep file: where (`file:line`), which field, and what is wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{location}: `{field}`: {what}")]
pub struct SpecError {
    pub location: String,
    pub field: String,
    pub what: String,
}

/// A sweep read from its file: its points, each a map of field to value.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The file's name as given (diagnostics, the database's `sweep` column).
    pub file: String,
    /// The folder relative paths in the file are taken from.
    pub dir: PathBuf,
    pub description: String,
    /// SM threads of each point's simulation.
    pub threads: usize,
    pub points: Vec<Point>,
}

/// One point: its fields, and where each was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub fields: BTreeMap<String, toml::Value>,
    /// `file:line` of each field.
    pub at: BTreeMap<String, String>,
}

impl Point {
    /// The fields as a JSON object (the database's `params` column).
    pub fn params_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.fields).expect("TOML values are JSON values")
    }

    pub fn str(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(toml::Value::as_str)
    }

    /// The error naming `field` of this point.
    pub fn error(&self, field: &str, what: impl Into<String>) -> SpecError {
        SpecError {
            location: self.at.get(field).cloned().unwrap_or_default(),
            field: field.to_string(),
            what: what.into(),
        }
    }
}

type Table = BTreeMap<String, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    #[serde(default)]
    description: String,
    threads: Option<Spanned<i64>>,
    #[serde(default)]
    fixed: Table,
    #[serde(default)]
    grid: Table,
    #[serde(default)]
    point: Vec<Table>,
}

/// `file:line` of byte `offset` in `text`.
fn line_at(file: &str, text: &str, offset: usize) -> String {
    let line = 1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    format!("{file}:{line}")
}

/// Reads and checks the sweep `text` of file `file` (relative paths inside are taken from
/// `file`'s folder).
pub fn parse(file: &str, text: &str) -> Result<Sweep, SpecError> {
    let raw: SweepFile = toml::from_str(text).map_err(|e| {
        let location = e
            .span()
            .map(|s| line_at(file, text, s.start))
            .unwrap_or_else(|| file.to_string());
        SpecError {
            location,
            field: "sweep".into(),
            what: e.message().trim_end().to_string(),
        }
    })?;
    let at = |s: &std::ops::Range<usize>| line_at(file, text, s.start);
    let threads = match raw.threads {
        None => 1,
        Some(t) if (1..=1024).contains(t.get_ref()) => *t.get_ref() as usize,
        Some(t) => {
            return Err(SpecError {
                location: at(&t.span()),
                field: "threads".into(),
                what: format!("{} is out of 1..=1024", t.get_ref()),
            })
        }
    };
    // The list of points (one empty point without one), each crossed with the grid.
    let mut base: Vec<Point> = Vec::new();
    if raw.point.is_empty() {
        base.push(Point {
            fields: BTreeMap::new(),
            at: BTreeMap::new(),
        });
    }
    for p in &raw.point {
        let mut point = Point {
            fields: BTreeMap::new(),
            at: BTreeMap::new(),
        };
        for (k, v) in p {
            point.at.insert(k.clone(), at(&v.span()));
            point.fields.insert(k.clone(), v.get_ref().clone());
        }
        base.push(point);
    }
    let mut axes: Vec<(String, String, Vec<toml::Value>)> = Vec::new();
    for (k, v) in &raw.grid {
        let here = at(&v.span());
        match v.get_ref() {
            toml::Value::Array(a) if a.is_empty() => {
                return Err(SpecError {
                    location: here,
                    field: format!("grid.{k}"),
                    what: "an empty list: the grid would have no point".into(),
                })
            }
            toml::Value::Array(a) => axes.push((k.clone(), here, a.clone())),
            other => {
                return Err(SpecError {
                    location: here,
                    field: format!("grid.{k}"),
                    what: format!("{} `{other}`: a grid axis is a list", other.type_str()),
                })
            }
        }
    }
    if raw.point.is_empty() && axes.is_empty() && raw.fixed.is_empty() {
        return Err(SpecError {
            location: file.to_string(),
            field: "grid".into(),
            what:
                "the sweep has no point: give [fixed] fields, a [grid] of lists or [[point]] tables"
                    .into(),
        });
    }
    let mut points = Vec::new();
    for b in &base {
        // Every combination of the axes, the last varying fastest.
        let combinations: usize = axes.iter().map(|(_, _, v)| v.len()).product();
        for n in 0..combinations {
            let mut p = Point {
                fields: BTreeMap::new(),
                at: BTreeMap::new(),
            };
            for (k, v) in &raw.fixed {
                p.fields.insert(k.clone(), v.get_ref().clone());
                p.at.insert(k.clone(), at(&v.span()));
            }
            for (k, v) in &b.fields {
                if p.fields.insert(k.clone(), v.clone()).is_some() {
                    return Err(b.error(k, "given in [fixed] too"));
                }
                p.at.insert(k.clone(), b.at[k].clone());
            }
            let mut rest = n;
            let mut chosen = vec![0usize; axes.len()];
            for (a, (_, _, values)) in axes.iter().enumerate().rev() {
                chosen[a] = rest % values.len();
                rest /= values.len();
            }
            for (a, (k, here, values)) in axes.iter().enumerate() {
                if p.fields.contains_key(k) {
                    return Err(SpecError {
                        location: here.clone(),
                        field: format!("grid.{k}"),
                        what: "given in [fixed] or a [[point]] too".into(),
                    });
                }
                p.fields.insert(k.clone(), values[chosen[a]].clone());
                p.at.insert(k.clone(), here.clone());
            }
            check_point(&p)?;
            points.push(p);
        }
    }
    let dir = Path::new(file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Sweep {
        file: file.to_string(),
        dir,
        description: raw.description,
        threads,
        points,
    })
}

/// Checks one point's fields: known names, values of the right type and name, and fields
/// that fit its kind (kernel or scenario).
fn check_point(p: &Point) -> Result<(), SpecError> {
    for (k, v) in &p.fields {
        let want_str = |v: &toml::Value| -> Result<String, SpecError> {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| p.error(k, format!("{} `{v}`: expected a string", v.type_str())))
        };
        match k.as_str() {
            "kernel" => {
                let name = want_str(v)?;
                if suite::by_name(&name).is_none() {
                    let names: Vec<&str> = suite::all().iter().map(|k| k.name()).collect();
                    return Err(p.error(
                        k,
                        format!(
                            "no suite kernel `{name}`; the suite has: {}",
                            names.join(", ")
                        ),
                    ));
                }
            }
            "scenario" | "gpu" => {
                want_str(v)?;
            }
            "scheduler" => {
                let s = want_str(v)?;
                scheduler(&s).map_err(|e| p.error(k, e))?;
            }
            "size" => {
                let s = want_str(v)?;
                size(&s).map_err(|e| p.error(k, e))?;
            }
            "target" => {
                let s = want_str(v)?;
                target(&s).map_err(|e| p.error(k, e))?;
            }
            "policy" => {
                workload::choice::from_value::<sched::PolicyKind>(v.clone())
                    .map_err(|e| p.error(k, e.to_string()))?;
            }
            "mechanism" => {
                workload::choice::from_value::<preempt::MechanismKind>(v.clone())
                    .map_err(|e| p.error(k, e.to_string()))?;
            }
            "seed" | "max_cycles" => match v.as_integer() {
                Some(i) if i >= 0 && !(k == "max_cycles" && i == 0) => {}
                _ => {
                    return Err(p.error(
                        k,
                        format!("{} `{v}`: expected a positive integer", v.type_str()),
                    ))
                }
            },
            "time_slice_us" => {
                let x = v.as_float().or(v.as_integer().map(|i| i as f64));
                if !x.is_some_and(|x| sched::SLICE_US_RANGE.contains(&x)) {
                    return Err(p.error(k, format!("`{v}`: expected a number in 0.01..=10^7")));
                }
            }
            "sharing" | "alone" => {
                if v.as_bool().is_none() {
                    return Err(
                        p.error(k, format!("{} `{v}`: expected true or false", v.type_str()))
                    );
                }
            }
            other if other.starts_with("scenario.") && other.len() > "scenario.".len() => {}
            other => {
                return Err(p.error(
                    other,
                    format!(
                        "unknown field; a point has {} and scenario.PATH",
                        FIELDS.join(", ")
                    ),
                ))
            }
        }
    }
    let is_kernel = p.fields.contains_key("kernel");
    let is_scenario = p.fields.contains_key("scenario");
    let first = p.fields.keys().next().cloned().unwrap_or_default();
    match (is_kernel, is_scenario) {
        (true, true) => Err(p.error(
            "scenario",
            "a point runs a suite kernel (`kernel`) or a scenario (`scenario`), not both",
        )),
        (false, false) => Err(p.error(
            &first,
            "the point names neither a suite kernel (`kernel`) nor a scenario (`scenario`)",
        )),
        (true, false) => {
            for k in p.fields.keys() {
                if SCENARIO_ONLY.contains(&k.as_str()) || k.starts_with("scenario.") {
                    return Err(p.error(k, "only a scenario point has this field"));
                }
            }
            Ok(())
        }
        (false, true) => {
            for k in p.fields.keys() {
                if KERNEL_ONLY.contains(&k.as_str()) {
                    return Err(p.error(k, "only a kernel point has this field"));
                }
            }
            Ok(())
        }
    }
}

pub(crate) fn size(s: &str) -> Result<suite::Size, String> {
    match s {
        "small" => Ok(suite::Size::Small),
        "large" => Ok(suite::Size::Large),
        "huge" => Ok(suite::Size::Huge),
        other => Err(format!("`{other}`: expected one of small, large, huge")),
    }
}

pub(crate) fn target(s: &str) -> Result<suite::Target, String> {
    suite::Target::ALL
        .into_iter()
        .find(|t| t.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = suite::Target::ALL.iter().map(|t| t.name()).collect();
            format!("`{s}`: expected one of {}", names.join(", "))
        })
}

pub(crate) fn scheduler(s: &str) -> Result<gpu::config::SchedulerPolicy, String> {
    use gpu::config::SchedulerPolicy;
    match s {
        "lrr" => Ok(SchedulerPolicy::Lrr),
        "gto" => Ok(SchedulerPolicy::Gto),
        "two-level" => Ok(SchedulerPolicy::TwoLevel),
        other => Err(format!("`{other}`: expected one of lrr, gto, two-level")),
    }
}
