//! Chimera (Park et al., ASPLOS'15, as papers/li-pep §2.2 and §3.2 describe it): for each
//! TB of the reserved SM, drain it, flush it or switch its context, whichever meets the
//! preemption deadline at the least throughput cost, from estimates built on counters the
//! hardware keeps — never from knowledge of the future.
//!
//! **Estimates** (core cycles), per TB at the request:
//! * *drain*: remaining instructions × the TB's observed CPI, where the remaining
//!   instructions are the kernel's mean warp instructions per finished TB minus what the TB
//!   has executed, and the CPI is the cycles since the TB was placed over the warp
//!   instructions it executed since. Before any TB of the kernel has finished, or before
//!   the TB has executed anything, there is no estimate and draining is not chosen (unless
//!   nothing else is possible).
//! * *switch*: the TB's full context (every allocated register of its live lanes, shared
//!   memory, SIMT stacks and barrier state; for Chimera+dirty, only the registers whose
//!   dirty bits are set) over the SM's share of peak DRAM bandwidth.
//!   As in Chimera, each TB is estimated alone: TBs switching together share the SM's
//!   path serially, which the estimate ignores (the inaccuracy papers/li-pep §3.2 points
//!   out, and which the measured latencies show).
//! * *flush*: free, but possible only for a TB still relaxed-idempotent
//!   ([`crate::flush`]).
//!
//! **Costs** (throughput lost, core cycles of the TB's slot): flushing loses the work done
//! (warp instructions executed × CPI); switching loses the save and the restore (twice the
//! switch estimate); draining loses the time the TB's slot idles while the longest
//! draining TB finishes.
//!
//! **Choice.** The TBs whose drain estimate meets the deadline form the draining set; its
//! longest estimate prices each member's idle time. Each TB then takes the cheapest
//! technique whose latency meets the deadline, or, when none does, the fastest (flushing
//! if it can, else the quicker of switching and draining). The choice and its estimates
//! are recorded ([`Record::Chose`]).

use gpu::timing::{HoldId, SmId, TbContext, TbRef, TimingError, TransferId};
use serde::Serialize;

use crate::drain::Drain;
use crate::flush::Flush;
use crate::switch::{Registers, Switch, SwitchConfig};
use crate::{Cx, Mechanism, Preempted, Record, Want};

/// What Chimera did with a TB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Technique {
    Drain,
    Flush,
    Switch,
    /// A base checkpoint ahead of the request (PEP, papers/li-pep §3.3).
    Checkpoint,
}

/// Chimera's estimates for one TB (core cycles).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimates {
    /// `None`: no profile to estimate from.
    pub drain: Option<f64>,
    pub switch: f64,
    /// The work flushing would throw away, when the TB may be flushed.
    pub flush_cost: Option<f64>,
    pub deadline: f64,
}

/// The Chimera mechanism.
pub struct Chimera {
    deadline_us: f64,
    /// What a switch saves: every allocated register (Chimera), or only the dirty ones
    /// (Chimera+dirty, papers/li-pep §4, PEP's baseline).
    registers: Registers,
    flush: Flush,
    switch: Switch,
    draining: Drain,
}

impl Chimera {
    /// Chimera with a preemption deadline of `deadline_us` microseconds.
    pub fn new(deadline_us: f64) -> Chimera {
        Chimera::saving(deadline_us, Registers::All)
    }

    /// Chimera+dirty (papers/li-pep §4): a switched TB saves only the registers written
    /// since it was placed, and its switch estimate counts only those.
    pub fn dirty(deadline_us: f64) -> Chimera {
        Chimera::saving(deadline_us, Registers::Dirty)
    }

    fn saving(deadline_us: f64, registers: Registers) -> Chimera {
        Chimera {
            deadline_us,
            registers,
            flush: Flush::new(true),
            switch: Switch::new(
                "chimera-switch",
                SwitchConfig {
                    registers,
                    ..SwitchConfig::BASELINE
                },
            ),
            draining: Drain::default(),
        }
    }

    /// Picks a technique for TB `i` given every TB's estimates.
    fn choose(all: &[Estimates], i: usize) -> Technique {
        let e = &all[i];
        let meets = |lat: f64| lat <= e.deadline;
        // The longest drain among the TBs that could drain in time prices draining.
        let longest = all
            .iter()
            .filter_map(|x| x.drain)
            .filter(|&d| d <= e.deadline)
            .fold(0.0, f64::max);
        let mut options: Vec<(Technique, f64, f64)> = Vec::new();
        if let Some(d) = e.drain {
            options.push((Technique::Drain, d, longest - d.min(longest)));
        }
        if let Some(cost) = e.flush_cost {
            options.push((Technique::Flush, 0.0, cost));
        }
        options.push((Technique::Switch, e.switch, 2.0 * e.switch));
        let in_time = options.iter().filter(|o| meets(o.1));
        if let Some(best) = in_time.min_by(|a, b| a.2.total_cmp(&b.2)) {
            return best.0;
        }
        options
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("switching is always an option")
            .0
    }
}

impl Mechanism for Chimera {
    fn name(&self) -> String {
        match self.registers {
            Registers::Dirty => "chimera-dirty".into(),
            _ => "chimera".into(),
        }
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        let tbs = cx.take(sm, &want);
        let m = &*cx.machine;
        let deadline = self.deadline_us * m.config().sm.clock_mhz;
        let bandwidth = m.memory_config().dram_bytes_per_core_cycle() / f64::from(m.sm_count());
        let mut estimates = Vec::with_capacity(tbs.len());
        for &tb in &tbs {
            let p = m.tb_progress(sm, tb).expect("resident");
            let cpi =
                (p.executed_here > 0).then(|| (now - p.placed_at) as f64 / p.executed_here as f64);
            let mean = m.launch(tb.launch).mean_tb_instructions();
            let drain = match (mean, cpi) {
                (Some(mean), Some(cpi)) => Some((mean - p.executed as f64).max(0.0) * cpi),
                _ => None,
            };
            let bytes = match self.registers {
                Registers::Dirty => self.switch.dirty_context_bytes(m, sm, tb),
                _ => self.switch.full_context_bytes(m, sm, tb),
            };
            let redo = cpi.map_or((now - p.placed_at) as f64, |c| p.executed as f64 * c);
            estimates.push(Estimates {
                drain,
                switch: bytes as f64 / bandwidth.max(1e-9),
                flush_cost: self.flush.flushable(m, sm, tb).map(|_| redo),
                deadline,
            });
        }
        for (i, &tb) in tbs.iter().enumerate() {
            let choice = Chimera::choose(&estimates, i);
            cx.out.records.push(Record::Chose {
                cycle: now,
                sm,
                tb,
                technique: choice,
                estimates: estimates[i],
            });
            match choice {
                Technique::Drain => self.draining.watch(sm, tb, now),
                Technique::Flush => {
                    let discarded = self
                        .flush
                        .flushable(cx.machine, sm, tb)
                        .expect("found flushable above");
                    self.flush.flush_tb(sm, tb, discarded, cx)?;
                }
                Technique::Switch => self.switch.switch_tb(sm, tb, cx)?,
                Technique::Checkpoint => unreachable!("Chimera never checkpoints ahead"),
            }
        }
        Ok(())
    }

    fn warp_drained(
        &mut self,
        sm: SmId,
        tb: TbRef,
        warp: u32,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        self.switch.warp_drained(sm, tb, warp, cx)
    }

    fn evicted(
        &mut self,
        sm: SmId,
        context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        self.switch.evicted(sm, context, hold, cx)
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        if !self.draining.finished_tb(sm, tb, cycle, cx) {
            self.switch.finished(sm, tb, cycle, cx);
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        self.switch.transfer_done(sm, id, cx)
    }

    fn resume(&mut self, sm: SmId, tb: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        self.switch.resume(sm, tb, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(drain: Option<f64>, switch: f64, flush: Option<f64>) -> Estimates {
        Estimates {
            drain,
            switch,
            flush_cost: flush,
            deadline: 1000.0,
        }
    }

    #[test]
    fn a_tb_near_its_end_drains_a_young_idempotent_one_flushes_a_long_one_switches() {
        let all = [
            // Almost done: draining is in time and costs little.
            e(Some(100.0), 600.0, None),
            // Just started and idempotent: flushing loses little.
            e(Some(9000.0), 600.0, Some(50.0)),
            // Far from done and past its idempotent region: switching is what is in time.
            e(Some(9000.0), 600.0, None),
        ];
        assert_eq!(Chimera::choose(&all, 0), Technique::Drain);
        assert_eq!(Chimera::choose(&all, 1), Technique::Flush);
        assert_eq!(Chimera::choose(&all, 2), Technique::Switch);
    }

    #[test]
    fn cost_decides_among_options_in_time_and_latency_when_none_is() {
        // Drain in time (idle cost 900 − 800 = 100) beats a switch in time (cost 1200).
        let all = [e(Some(800.0), 600.0, None), e(Some(900.0), 600.0, None)];
        assert_eq!(Chimera::choose(&all, 0), Technique::Drain);
        // A costly flush (redo 5000) loses to a switch in time.
        assert_eq!(
            Chimera::choose(&[e(Some(5000.0), 600.0, Some(5000.0))], 0),
            Technique::Switch
        );
        // Nothing in time: the quickest, here draining (1500) over switching (2000).
        assert_eq!(
            Chimera::choose(&[e(Some(1500.0), 2000.0, None)], 0),
            Technique::Drain
        );
        // No profile yet: no drain estimate, so a switch.
        assert_eq!(
            Chimera::choose(&[e(None, 2000.0, None)], 0),
            Technique::Switch
        );
    }
}
