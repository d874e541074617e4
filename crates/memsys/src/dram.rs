//! DRAM channels: banks with row buffers, an FR-FCFS scheduler and a data bus of fixed width.
//!
//! Follows the GPGPU-Sim DRAM model used by all the papers' evaluations (papers/lin-thesis
//! Table 4.1: "FR-FCFS policy, 128 transaction queue entries"; papers/lin-lightweight Table I:
//! GDDR5 at 924 MHz, 384-bit bus), simplified to four timing parameters:
//!
//! * **Address.** A request carries a byte address local to its channel. Rows are interleaved
//!   over banks: `r = addr / row_bytes`, bank `r % banks`, row `r / banks` (row:bank:column,
//!   column in the low bits), so a sequential stream fills a row, then moves to the next bank.
//! * **Banks.** Open-row policy. An *activate* opens a row; a column command may follow `t_rcd`
//!   cycles later; a *precharge* closes the row no earlier than `t_ras` after its activate (and
//!   not before the last burst to the bank ended); the next activate waits `t_rp`.
//! * **Data bus.** A column command puts its data on the channel's bus `t_cl` cycles later for
//!   `ceil(bytes / bus_bytes_per_cycle)` cycles. Bus bursts never overlap; consecutive column
//!   commands to one bank are spaced by their burst length (tCCD).
//! * **Controller.** `controller_latency` cycles are added to every read between the end of its
//!   burst and its data being handed back (queues, PHY, return path), so that the unloaded
//!   latency matches a configured total (e.g. papers/lin-thesis Table 4.1: 380 cycles).
//! * **FR-FCFS** (Rixner et al.; the GPGPU-Sim scheduler). Each cycle: one column command for
//!   the best *row hit* (request whose row is open and whose bank is ready), then one row
//!   command (precharge or activate) for the best request whose row is not open, skipping banks
//!   that still have queued row hits (the open row is kept while it is useful). "Best" is
//!   `Normal` priority before `Context` (papers/lin-lightweight §V), then oldest.
//!
//! Unloaded latencies (DRAM cycles, `b` = burst cycles): row hit `t_cl + b + ctrl`; closed bank
//! `t_rcd + t_cl + b + ctrl`; row conflict `t_rp + t_rcd + t_cl + b + ctrl` once `t_ras` has
//! passed. Not modelled: refresh, tWTR/tRTW turnarounds, tRRD/tFAW, bank groups.
//!
//! Invariants: at most `queue_entries` requests wait per channel; bursts on the bus are disjoint
//! and in issue order; read completions are returned in the order their bursts ended.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::Priority;

/// The fixed description of one DRAM channel (all channels are alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DramSpec {
    /// Banks per channel.
    pub banks: u32,
    /// Bytes in one row of one bank, as seen by the channel (page size × chips in the channel).
    pub row_bytes: u64,
    /// Requests the scheduler may hold per channel (new requests wait upstream when full).
    pub queue_entries: usize,
    /// Row-to-column delay (activate to read/write), DRAM cycles.
    pub t_rcd: u64,
    /// Column access (CAS) latency, DRAM cycles.
    pub t_cl: u64,
    /// Precharge time, DRAM cycles.
    pub t_rp: u64,
    /// Minimum activate-to-precharge time, DRAM cycles.
    pub t_ras: u64,
    /// Data-bus bytes per DRAM cycle (bus width in bytes × transfers per command clock; GDDR5
    /// with a 64-bit channel at "QDR" moves 32 bytes per cycle).
    pub bus_bytes_per_cycle: u32,
    /// Extra DRAM cycles between a read's last data beat and its data leaving the controller.
    pub controller_latency: u64,
}

impl DramSpec {
    /// Cycles a transfer of `bytes` holds the data bus.
    pub fn burst_cycles(&self, bytes: u32) -> u64 {
        u64::from(bytes.div_ceil(self.bus_bytes_per_cycle.max(1)).max(1))
    }

    /// Unloaded read latency when the row is open (DRAM cycles).
    pub fn row_hit_latency(&self, bytes: u32) -> u64 {
        self.t_cl + self.burst_cycles(bytes) + self.controller_latency
    }

    /// Unloaded read latency when the bank is closed (DRAM cycles).
    pub fn row_closed_latency(&self, bytes: u32) -> u64 {
        self.t_rcd + self.row_hit_latency(bytes)
    }

    /// Unloaded read latency when another row is open and `t_ras` has passed (DRAM cycles).
    pub fn row_conflict_latency(&self, bytes: u32) -> u64 {
        self.t_rp + self.row_closed_latency(bytes)
    }

    /// (bank, row) of a channel-local byte address.
    pub fn bank_row(&self, local_addr: u64) -> (u32, u64) {
        let r = local_addr / self.row_bytes.max(1);
        let banks = u64::from(self.banks.max(1));
        ((r % banks) as u32, r / banks)
    }
}

/// Counters of one channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DramStats {
    /// DRAM cycles simulated.
    pub cycles: u64,
    /// Read requests served.
    pub reads: u64,
    /// Write requests served.
    pub writes: u64,
    /// Requests served from an already open row.
    pub row_hits: u64,
    /// Requests that needed an activate (closed bank or row conflict).
    pub row_misses: u64,
    /// Activate commands.
    pub activates: u64,
    /// Precharge commands.
    pub precharges: u64,
    /// Cycles the data bus carried data.
    pub bus_busy_cycles: u64,
    /// Bytes moved on the data bus.
    pub bytes: u64,
    /// Requests refused because the queue was full.
    pub queue_full: u64,
    /// Context-priority requests served.
    pub context_requests: u64,
}

impl DramStats {
    /// The counts between the snapshot `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &DramStats) -> DramStats {
        DramStats {
            cycles: self.cycles - earlier.cycles,
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            row_hits: self.row_hits - earlier.row_hits,
            row_misses: self.row_misses - earlier.row_misses,
            activates: self.activates - earlier.activates,
            precharges: self.precharges - earlier.precharges,
            bus_busy_cycles: self.bus_busy_cycles - earlier.bus_busy_cycles,
            bytes: self.bytes - earlier.bytes,
            queue_full: self.queue_full - earlier.queue_full,
            context_requests: self.context_requests - earlier.context_requests,
        }
    }

    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &DramStats) {
        self.cycles += o.cycles;
        self.reads += o.reads;
        self.writes += o.writes;
        self.row_hits += o.row_hits;
        self.row_misses += o.row_misses;
        self.activates += o.activates;
        self.precharges += o.precharges;
        self.bus_busy_cycles += o.bus_busy_cycles;
        self.bytes += o.bytes;
        self.queue_full += o.queue_full;
        self.context_requests += o.context_requests;
    }

    /// Fraction of cycles the data bus was busy.
    pub fn bus_utilisation(&self) -> f64 {
        if self.cycles == 0 {
            0.0
        } else {
            self.bus_busy_cycles as f64 / self.cycles as f64
        }
    }
}

/// A request to a channel.
#[derive(Debug, Clone)]
pub struct DramRequest<T> {
    /// Byte address local to the channel.
    pub local_addr: u64,
    /// Bytes moved on the bus.
    pub bytes: u32,
    /// A write (no data returned) or a read.
    pub write: bool,
    /// Scheduling class.
    pub priority: Priority,
    /// Returned with the read's completion.
    pub payload: T,
}

#[derive(Debug, Clone, Copy, Default)]
struct Bank {
    open_row: Option<u64>,
    col_ready: u64,
    pre_ready: u64,
    act_ready: u64,
}

#[derive(Debug, Clone)]
struct Entry<T> {
    seq: u64,
    bank: u32,
    row: u64,
    needed_activate: bool,
    req: DramRequest<T>,
}

impl<T> Entry<T> {
    fn key(&self) -> (usize, u64) {
        (self.req.priority.class(), self.seq)
    }
}

/// One DRAM channel: queue, banks, bus, completions and counters.
#[derive(Debug, Clone)]
pub struct DramChannel<T> {
    spec: DramSpec,
    banks: Vec<Bank>,
    queue: Vec<Entry<T>>,
    bank_has_hit: Vec<bool>,
    seq: u64,
    bus_free: u64,
    returns: VecDeque<(u64, T)>,
    stats: DramStats,
}

impl<T> DramChannel<T> {
    /// An idle channel with every bank closed.
    pub fn new(spec: DramSpec) -> Self {
        let banks = spec.banks.max(1) as usize;
        Self {
            banks: vec![Bank::default(); banks],
            queue: Vec::with_capacity(spec.queue_entries),
            bank_has_hit: vec![false; banks],
            seq: 0,
            bus_free: 0,
            returns: VecDeque::new(),
            stats: DramStats::default(),
            spec,
        }
    }

    /// The fixed description.
    pub fn spec(&self) -> &DramSpec {
        &self.spec
    }

    /// The counters.
    pub fn stats(&self) -> &DramStats {
        &self.stats
    }

    /// True when the queue can take a request.
    pub fn can_accept(&self) -> bool {
        self.queue.len() < self.spec.queue_entries.max(1)
    }

    /// Requests waiting in the scheduler queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Adds a request to the scheduler queue (it may be scheduled in the current cycle: the hop
    /// into the channel is paid by the queue that brought it). Returns it back when full.
    pub fn try_enqueue(&mut self, req: DramRequest<T>) -> Result<(), DramRequest<T>> {
        if !self.can_accept() {
            self.stats.queue_full += 1;
            return Err(req);
        }
        let (bank, row) = self.spec.bank_row(req.local_addr);
        self.queue.push(Entry {
            seq: self.seq,
            bank,
            row,
            needed_activate: false,
            req,
        });
        self.seq += 1;
        Ok(())
    }

    /// Takes the oldest completed read whose data is available at DRAM cycle `now`.
    pub fn pop_return(&mut self, now: u64) -> Option<T> {
        match self.returns.front() {
            Some(&(t, _)) if t <= now => self.returns.pop_front().map(|(_, p)| p),
            _ => None,
        }
    }

    /// True when nothing is queued or waiting to be returned.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.returns.is_empty()
    }

    /// One DRAM cycle of scheduling. Returns true when a command was issued.
    pub fn tick(&mut self, now: u64) -> bool {
        self.stats.cycles += 1;
        if self.queue.is_empty() {
            return false;
        }
        let mut progressed = false;
        // Column phase: the best ready row hit, if the bus is free when its data would start.
        if self.bus_free <= now + self.spec.t_cl {
            let mut best: Option<usize> = None;
            for (i, e) in self.queue.iter().enumerate() {
                let b = &self.banks[e.bank as usize];
                if b.open_row == Some(e.row)
                    && b.col_ready <= now
                    && best.is_none_or(|j| e.key() < self.queue[j].key())
                {
                    best = Some(i);
                }
            }
            if let Some(i) = best {
                let e = self.queue.swap_remove(i);
                self.column(now, e);
                progressed = true;
            }
        }
        // Row phase: open the row of the best request whose row is not open.
        self.bank_has_hit.iter_mut().for_each(|h| *h = false);
        for e in &self.queue {
            if self.banks[e.bank as usize].open_row == Some(e.row) {
                self.bank_has_hit[e.bank as usize] = true;
            }
        }
        let mut best: Option<usize> = None;
        for (i, e) in self.queue.iter().enumerate() {
            let b = &self.banks[e.bank as usize];
            if self.bank_has_hit[e.bank as usize] {
                continue;
            }
            let ready = match b.open_row {
                Some(_) => b.pre_ready <= now,
                None => b.act_ready <= now,
            };
            if ready && best.is_none_or(|j| e.key() < self.queue[j].key()) {
                best = Some(i);
            }
        }
        if let Some(i) = best {
            let (bank, row) = (self.queue[i].bank as usize, self.queue[i].row);
            self.queue[i].needed_activate = true;
            let b = &mut self.banks[bank];
            if b.open_row.is_some() {
                b.open_row = None;
                b.act_ready = now + self.spec.t_rp;
                self.stats.precharges += 1;
            } else {
                b.open_row = Some(row);
                b.col_ready = b.col_ready.max(now + self.spec.t_rcd);
                b.pre_ready = b.pre_ready.max(now + self.spec.t_ras);
                self.stats.activates += 1;
            }
            progressed = true;
        }
        progressed
    }

    fn column(&mut self, now: u64, e: Entry<T>) {
        let burst = self.spec.burst_cycles(e.req.bytes);
        let start = (now + self.spec.t_cl).max(self.bus_free);
        let end = start + burst;
        self.bus_free = end;
        let b = &mut self.banks[e.bank as usize];
        b.col_ready = now + burst;
        b.pre_ready = b.pre_ready.max(end);
        self.stats.bus_busy_cycles += burst;
        self.stats.bytes += u64::from(e.req.bytes);
        if e.needed_activate {
            self.stats.row_misses += 1;
        } else {
            self.stats.row_hits += 1;
        }
        if e.req.priority == Priority::Context {
            self.stats.context_requests += 1;
        }
        if e.req.write {
            self.stats.writes += 1;
        } else {
            self.stats.reads += 1;
            self.returns
                .push_back((end + self.spec.controller_latency, e.req.payload));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DramSpec {
        DramSpec {
            banks: 4,
            row_bytes: 2048,
            queue_entries: 16,
            t_rcd: 12,
            t_cl: 12,
            t_rp: 12,
            t_ras: 28,
            bus_bytes_per_cycle: 32,
            controller_latency: 10,
        }
    }

    fn read(addr: u64, tag: u32) -> DramRequest<u32> {
        DramRequest {
            local_addr: addr,
            bytes: 128,
            write: false,
            priority: Priority::Normal,
            payload: tag,
        }
    }

    fn run(ch: &mut DramChannel<u32>, from: u64, out: &mut Vec<(u64, u32)>) -> u64 {
        let mut t = from;
        while !ch.is_idle() {
            ch.tick(t);
            while let Some(p) = ch.pop_return(t) {
                out.push((t, p));
            }
            t += 1;
        }
        t
    }

    #[test]
    fn closed_hit_and_conflict_latencies() {
        let s = spec();
        let mut ch = DramChannel::new(s.clone());
        let mut out = Vec::new();
        ch.try_enqueue(read(0, 1)).unwrap();
        let t = run(&mut ch, 0, &mut out);
        assert_eq!(out[0], (s.row_closed_latency(128), 1));
        out.clear();
        ch.try_enqueue(read(128, 2)).unwrap();
        run(&mut ch, t, &mut out);
        assert_eq!(out[0].0 - t, s.row_hit_latency(128));
        // Same bank (0), another row: rows are interleaved over 4 banks.
        out.clear();
        let t = t + 100;
        ch.try_enqueue(read(4 * 2048, 3)).unwrap();
        run(&mut ch, t, &mut out);
        assert_eq!(out[0].0 - t, s.row_conflict_latency(128));
        assert_eq!(ch.stats().row_hits, 1);
        assert_eq!(ch.stats().row_misses, 2);
    }

    #[test]
    fn fr_fcfs_prefers_row_hit_over_older_miss() {
        let mut ch = DramChannel::new(spec());
        let mut out = Vec::new();
        ch.try_enqueue(read(0, 0)).unwrap();
        let t = run(&mut ch, 0, &mut out) + 50;
        out.clear();
        ch.try_enqueue(read(4 * 2048, 1)).unwrap(); // older, row conflict in bank 0
        ch.try_enqueue(read(256, 2)).unwrap(); // younger, row hit in bank 0
        run(&mut ch, t, &mut out);
        let order: Vec<u32> = out.iter().map(|o| o.1).collect();
        assert_eq!(order, vec![2, 1]);
    }

    #[test]
    fn context_after_normal() {
        let mut ch = DramChannel::new(spec());
        let mut out = Vec::new();
        let mut c = read(0, 1);
        c.priority = Priority::Context;
        ch.try_enqueue(c).unwrap();
        ch.try_enqueue(read(128, 2)).unwrap();
        run(&mut ch, 0, &mut out);
        let order: Vec<u32> = out.iter().map(|o| o.1).collect();
        assert_eq!(order, vec![2, 1]);
    }
}
