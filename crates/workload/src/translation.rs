//! A scenario's `[translation]` table: the fields of the GPU's `[memory.translation]` a
//! scenario may change (papers/tanasic-thesis ch. 6: the pipeline organisation, TB
//! switching, page size and walks, and demand paging's link, costs and handler), so one
//! scenario file can ask for a setting without a copy of the GPU file.
//!
//! ```toml
//! [translation]
//! pipeline = "operand-log"        # stall | wd-commit | wd-lastcheck | replay-queue | operand-log
//! operand_log_bytes = 16384       # 8192..=32768
//! tb_switch = "save"              # off | save | ideal (needs a pipeline that squashes)
//! tb_switch_extra = 4             # 1..=64
//! # page_kb = 64                  # 4 | 64 | 2048; also walkers, walk_latency
//!
//! [translation.faults]
//! link = "nvlink"                 # pcie | nvlink: whose costs apply
//! handler = "gpu"                 # cpu | gpu (local handling, §6.4.2)
//! gpu_handler_us = 20.0
//! # batch_size = 256; granularity_kb = 64
//! nvlink = { transfer_us = 12.0, alloc_us = 10.0 }   # also pcie = { ... }, either key alone
//! ```
//!
//! Each field is checked when the file is loaded, as the GPU file's own field is (against
//! `fault-study` with a pipeline that squashes, so a value is judged on its own), and again
//! against the GPU the scenario runs on ([`TranslationOverrides::apply`]), where a field that
//! conflicts with the GPU's other fields is reported at the scenario's line. On a GPU that
//! does not translate addresses nothing can fault and the table changes nothing, as the
//! top-level `pipeline` never did; demand-paging fields likewise change nothing on a GPU
//! without `[memory.translation.faults]` (it cannot hold managed memory anyway).

use gpu::config::GpuConfig;
use memsys::{Handler, Link, Pipeline, TbSwitch};
use serde::Deserialize;
use toml::Spanned;

use crate::scenario::ScenarioError;

/// `[translation]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationSection {
    pub pipeline: Option<Spanned<Pipeline>>,
    pub operand_log_bytes: Option<Spanned<u32>>,
    pub tb_switch: Option<Spanned<TbSwitch>>,
    pub tb_switch_extra: Option<Spanned<u32>>,
    pub page_kb: Option<Spanned<u32>>,
    pub walkers: Option<Spanned<u32>>,
    pub walk_latency: Option<Spanned<u64>>,
    #[serde(default)]
    pub faults: FaultsSection,
}

/// `[translation.faults]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSection {
    pub link: Option<Spanned<Link>>,
    pub granularity_kb: Option<Spanned<u32>>,
    pub batch_size: Option<Spanned<u32>>,
    pub handler: Option<Spanned<Handler>>,
    pub gpu_handler_us: Option<Spanned<f64>>,
    #[serde(default)]
    pub pcie: CostsSection,
    #[serde(default)]
    pub nvlink: CostsSection,
}

/// A link's per-fault costs as written; either key may be left to the GPU.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostsSection {
    pub transfer_us: Option<Spanned<f64>>,
    pub alloc_us: Option<Spanned<f64>>,
}

/// What a scenario changes in the GPU's `[memory.translation]`: each field `None` leaves
/// the GPU's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranslationOverrides {
    pub pipeline: Option<Pipeline>,
    pub operand_log_bytes: Option<u32>,
    pub tb_switch: Option<TbSwitch>,
    pub tb_switch_extra: Option<u32>,
    pub page_kb: Option<u32>,
    pub walkers: Option<u32>,
    pub walk_latency: Option<u64>,
    pub link: Option<Link>,
    pub granularity_kb: Option<u32>,
    pub batch_size: Option<u32>,
    pub handler: Option<Handler>,
    pub gpu_handler_us: Option<f64>,
    pub pcie_transfer_us: Option<f64>,
    pub pcie_alloc_us: Option<f64>,
    pub nvlink_transfer_us: Option<f64>,
    pub nvlink_alloc_us: Option<f64>,
    /// Where the scenario sets each field, in the file's order: the field's path as a GPU
    /// file's errors name it (`translation.faults.link`), and `file:line:col`.
    pub at: Vec<(&'static str, String)>,
}

impl TranslationOverrides {
    /// The overrides `section` asks for; `locate` turns a byte offset of the file into
    /// `file:line:col`.
    pub fn from_section(s: TranslationSection, locate: &dyn Fn(usize) -> String) -> Self {
        let mut at: Vec<(&'static str, usize)> = Vec::new();
        let mut take = |field: &'static str, start: Option<usize>| {
            if let Some(start) = start {
                at.push((field, start));
            }
        };
        fn start<T>(v: &Option<Spanned<T>>) -> Option<usize> {
            v.as_ref().map(|v| v.span().start)
        }
        let f = &s.faults;
        take("translation.pipeline", start(&s.pipeline));
        take("translation.operand_log_bytes", start(&s.operand_log_bytes));
        take("translation.tb_switch", start(&s.tb_switch));
        take("translation.tb_switch_extra", start(&s.tb_switch_extra));
        take("translation.page_kb", start(&s.page_kb));
        take("translation.walkers", start(&s.walkers));
        take("translation.walk_latency", start(&s.walk_latency));
        take("translation.faults.link", start(&f.link));
        take(
            "translation.faults.granularity_kb",
            start(&f.granularity_kb),
        );
        take("translation.faults.batch_size", start(&f.batch_size));
        take("translation.faults.handler", start(&f.handler));
        take(
            "translation.faults.gpu_handler_us",
            start(&f.gpu_handler_us),
        );
        take(
            "translation.faults.pcie.transfer_us",
            start(&f.pcie.transfer_us),
        );
        take("translation.faults.pcie.alloc_us", start(&f.pcie.alloc_us));
        take(
            "translation.faults.nvlink.transfer_us",
            start(&f.nvlink.transfer_us),
        );
        take(
            "translation.faults.nvlink.alloc_us",
            start(&f.nvlink.alloc_us),
        );
        at.sort_by_key(|&(_, start)| start);
        let at = at
            .into_iter()
            .map(|(f, start)| (f, locate(start)))
            .collect();
        fn value<T>(v: Option<Spanned<T>>) -> Option<T> {
            v.map(Spanned::into_inner)
        }
        let f = s.faults;
        TranslationOverrides {
            pipeline: value(s.pipeline),
            operand_log_bytes: value(s.operand_log_bytes),
            tb_switch: value(s.tb_switch),
            tb_switch_extra: value(s.tb_switch_extra),
            page_kb: value(s.page_kb),
            walkers: value(s.walkers),
            walk_latency: value(s.walk_latency),
            link: value(f.link),
            granularity_kb: value(f.granularity_kb),
            batch_size: value(f.batch_size),
            handler: value(f.handler),
            gpu_handler_us: value(f.gpu_handler_us),
            pcie_transfer_us: value(f.pcie.transfer_us),
            pcie_alloc_us: value(f.pcie.alloc_us),
            nvlink_transfer_us: value(f.nvlink.transfer_us),
            nvlink_alloc_us: value(f.nvlink.alloc_us),
            at,
        }
    }

    /// Whether the scenario changes nothing.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// `gpu` with the overrides applied, checked as a GPU file's `[memory.translation]` is.
    /// A GPU that does not translate addresses is left as it is (nothing can fault), and so
    /// are the demand-paging fields of one without `[memory.translation.faults]`. An error
    /// is located at the scenario's line for the field it names, or at the scenario's first
    /// override when the field is the GPU's own (a conflict between the two).
    pub fn apply(&self, gpu: &mut GpuConfig, file: &str) -> Result<(), ScenarioError> {
        let Some(t) = gpu.memory.translation.as_mut().filter(|t| t.enabled) else {
            return Ok(());
        };
        fn set<T: Copy>(to: &mut T, v: Option<T>) {
            if let Some(v) = v {
                *to = v;
            }
        }
        set(&mut t.pipeline, self.pipeline);
        set(&mut t.operand_log_bytes, self.operand_log_bytes);
        set(&mut t.tb_switch, self.tb_switch);
        set(&mut t.tb_switch_extra, self.tb_switch_extra);
        set(&mut t.page_kb, self.page_kb);
        set(&mut t.walkers, self.walkers);
        set(&mut t.walk_latency, self.walk_latency);
        if let Some(f) = t.faults.as_mut() {
            set(&mut f.link, self.link);
            set(&mut f.granularity_kb, self.granularity_kb);
            set(&mut f.batch_size, self.batch_size);
            set(&mut f.handler, self.handler);
            set(&mut f.gpu_handler_us, self.gpu_handler_us);
            set(&mut f.pcie.transfer_us, self.pcie_transfer_us);
            set(&mut f.pcie.alloc_us, self.pcie_alloc_us);
            set(&mut f.nvlink.transfer_us, self.nvlink_transfer_us);
            set(&mut f.nvlink.alloc_us, self.nvlink_alloc_us);
        }
        t.validate().map_err(|e| {
            let memsys::ConfigError::Invalid { what, reason } = e;
            let (location, field, reason) = match self.at.iter().find(|(f, _)| *f == what) {
                Some((f, at)) => (at.clone(), *f, reason),
                None => (
                    self.at
                        .first()
                        .map_or_else(|| file.to_string(), |(_, at)| at.clone()),
                    what,
                    format!("{reason} (the GPU's own `{what}`, with this scenario's overrides)"),
                ),
            };
            ScenarioError {
                location,
                field: field.to_string(),
                what: format!("on {}: {reason}", gpu.name),
            }
        })
    }

    /// Checks each field on its own when the scenario is loaded: applied to `fault-study`
    /// with the operand log (a pipeline that squashes, so that TB switching alone is
    /// judged by its own value), as a GPU file's field would be.
    pub fn check(&self, file: &str) -> Result<(), ScenarioError> {
        if self.is_empty() {
            return Ok(());
        }
        let Ok(mut template) = GpuConfig::preset("fault-study") else {
            return Ok(());
        };
        if let Some(t) = template.memory.translation.as_mut() {
            t.pipeline = Pipeline::OperandLog;
        }
        // What is wrong here is wrong whatever GPU the scenario runs on.
        template.name = "any GPU".into();
        self.apply(&mut template, file)
    }
}
