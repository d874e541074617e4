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
//!   `Normal` priority before `Context` (papers/lin-lightweight §V), then oldest; among
//!   column commands, a request in the bus's current direction (read or write) goes before
//!   an older one in the other, for up to [`DIRECTION_BATCH`] commands in a row, so that
//!   reads and writes are served in batches and the turnarounds are paid once a batch, as
//!   memory controllers do with write queues.
//!
//! * **Channel constraints** (each 0 = not modelled). Column commands are at least `t_ccd`
//!   apart; activates at least `t_rrd` apart, and at most four in any `t_faw` window; a read
//!   command waits `t_wtr` after the last write burst ends (write-to-read turnaround), and a
//!   write burst starts `t_rtw` after the last read burst ends (read-to-write bus
//!   turnaround). The FR-FCFS pick skips requests these constraints hold back.
//! * **Refresh.** Every `t_refi` cycles the channel closes every bank (waiting for the
//!   `t_ras` and burst constraints of open rows, issuing nothing meanwhile) and refreshes for
//!   `t_rp + t_rfc` cycles, during which no bank can be activated (all-bank refresh).
//!
//! Unloaded latencies (DRAM cycles, `b` = burst cycles): row hit `t_cl + b + ctrl`; closed bank
//! `t_rcd + t_cl + b + ctrl`; row conflict `t_rp + t_rcd + t_cl + b + ctrl` once `t_ras` has
//! passed. Not modelled: bank groups (tCCD_L), write latency distinct from `t_cl`, per-bank
//! refresh.
//!
//! Invariants: at most `queue_entries` requests wait per channel; bursts on the bus are disjoint
//! and in issue order; read completions are returned in the order their bursts ended.

use std::collections::VecDeque;
use std::hint::select_unpredictable;

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
    /// Minimum cycles between two column commands of the channel (tCCD).
    #[serde(default)]
    pub t_ccd: u64,
    /// Minimum cycles between two activates of the channel (tRRD).
    #[serde(default)]
    pub t_rrd: u64,
    /// Window in which at most four activates may issue (tFAW).
    #[serde(default)]
    pub t_faw: u64,
    /// Cycles from the end of a write burst to the next read command (tWTR).
    #[serde(default)]
    pub t_wtr: u64,
    /// Idle data-bus cycles between a read burst and a following write burst (tRTW).
    #[serde(default)]
    pub t_rtw: u64,
    /// Cycles between two refreshes (tREFI); 0: no refresh.
    #[serde(default)]
    pub t_refi: u64,
    /// Cycles one all-bank refresh keeps the banks closed (tRFC).
    #[serde(default)]
    pub t_rfc: u64,
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
    /// All-bank refreshes.
    #[serde(default)]
    pub refreshes: u64,
    /// Read commands issued right after a write burst, and writes right after a read: the
    /// bus turnarounds tWTR and tRTW charge.
    #[serde(default)]
    pub turnarounds: u64,
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
            refreshes: self.refreshes - earlier.refreshes,
            turnarounds: self.turnarounds - earlier.turnarounds,
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
        self.refreshes += o.refreshes;
        self.turnarounds += o.turnarounds;
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
    /// Queued requests to this bank, and those of them to its open row (kept by every
    /// enqueue, column command, activate, precharge and refresh): a cycle whose banks
    /// rule out both commands skips the scans of the queue.
    queued: u32,
    hits: u32,
}

#[derive(Debug, Clone)]
struct Entry<T> {
    /// The scheduler's order among requests: the class in the top bits, then the arrival
    /// number ([`order_key`]); lower goes first.
    order: u64,
    bank: u32,
    row: u64,
    needed_activate: bool,
    req: DramRequest<T>,
}

/// Bit of an [`Entry::order`] set for a column command that would turn the bus around
/// while the current direction's batch is open: it sorts after every request of its class
/// that does not, and before the next class.
const TURNS: u64 = 1 << 61;

/// An entry's order: its class (`Priority::class`, 0 or 1) above the [`TURNS`] bit, then its
/// arrival number, so that comparing two orders compares (class, turns, arrival).
fn order_key(priority: Priority, seq: u64) -> u64 {
    debug_assert!(seq < TURNS);
    (priority.class() as u64) << 62 | seq
}

/// The times every command of one kind waits for ([`DramChannel::command_times`]).
struct CommandTimes {
    read: u64,
    write: u64,
    activate: u64,
}

/// Column commands in one direction before an older request in the other goes first.
pub const DIRECTION_BATCH: u32 = 16;

/// One DRAM channel: queue, banks, bus, completions and counters.
#[derive(Debug, Clone)]
pub struct DramChannel<T> {
    spec: DramSpec,
    banks: Vec<Bank>,
    /// The banks with queued requests (`Bank::queued > 0`), a bit each: the cycle's checks
    /// of which command a bank could take look at these only (most banks have none).
    busy_banks: Vec<u64>,
    queue: Vec<Entry<T>>,
    seq: u64,
    bus_free: u64,
    /// The last column command, the ends of the last read and write bursts, and whether the
    /// last burst was a write (for tCCD, tWTR and tRTW).
    last_column: Option<u64>,
    read_end: u64,
    write_end: u64,
    last_was_write: bool,
    /// Column commands in a row in the current direction.
    streak: u32,
    /// The last four activates (tRRD, tFAW), oldest first.
    activates: VecDeque<u64>,
    /// When the next refresh is due (tREFI).
    next_refresh: u64,
    returns: VecDeque<(u64, T)>,
    /// The first cycle at which the scheduler could issue a command
    /// ([`DramChannel::next_command_at`], worked out after each cycle it schedules): until
    /// then every timing check it makes answers as it did, so [`DramChannel::tick`] only
    /// counts the cycle. An arriving request brings it forward to its own.
    quiet_until: u64,
    stats: DramStats,
}

impl<T> DramChannel<T> {
    /// An idle channel with every bank closed.
    pub fn new(spec: DramSpec) -> Self {
        let banks = spec.banks.max(1) as usize;
        Self {
            banks: vec![Bank::default(); banks],
            busy_banks: vec![0; banks.div_ceil(64)],
            queue: Vec::with_capacity(spec.queue_entries),
            seq: 0,
            bus_free: 0,
            last_column: None,
            read_end: 0,
            write_end: 0,
            last_was_write: false,
            streak: 0,
            activates: VecDeque::with_capacity(4),
            next_refresh: spec.t_refi,
            returns: VecDeque::new(),
            quiet_until: 0,
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
        let b = &mut self.banks[bank as usize];
        b.queued += 1;
        if b.open_row == Some(row) {
            b.hits += 1;
        }
        self.busy_banks[bank as usize / 64] |= 1 << (bank % 64);
        // The new request may be served sooner than those already queued.
        let at = self.ready_at(&self.command_times(), bank, row, req.write);
        self.quiet_until = self.quiet_until.min(at);
        self.queue.push(Entry {
            order: order_key(req.priority, self.seq),
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

    /// A refresh, if one is due: `true` while the channel must issue nothing (waiting to
    /// close its banks); when it can, closes them and starts the refresh.
    fn refresh(&mut self, now: u64) -> bool {
        if self.spec.t_refi == 0 || now < self.next_refresh {
            return false;
        }
        if self
            .banks
            .iter()
            .any(|b| b.open_row.is_some() && b.pre_ready > now)
        {
            return true;
        }
        // The channel is not ticked while idle: refreshes that fell due then happened on
        // time, and only the latest can still be in progress.
        let missed = (now - self.next_refresh) / self.spec.t_refi;
        let due = self.next_refresh + missed * self.spec.t_refi;
        let start = self
            .banks
            .iter()
            .filter(|b| b.open_row.is_some())
            .map(|b| b.pre_ready)
            .fold(due, u64::max);
        let ready = start + self.spec.t_rp + self.spec.t_rfc;
        for b in &mut self.banks {
            b.hits = 0;
            if b.open_row.take().is_some() {
                self.stats.precharges += 1;
            }
            b.act_ready = b.act_ready.max(ready);
        }
        self.stats.refreshes += missed + 1;
        self.next_refresh = due + self.spec.t_refi;
        false
    }

    /// Whether a bank with queued requests satisfies `f` (the others never do for the
    /// scheduler's checks, which all ask for queued requests).
    #[inline]
    fn any_busy_bank(&self, f: impl Fn(&Bank) -> bool) -> bool {
        for (w, &word) in self.busy_banks.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let k = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if f(&self.banks[k]) {
                    return true;
                }
            }
        }
        false
    }

    /// Whether the activate constraints (tRRD, tFAW) allow an activate at `now`.
    fn may_activate(&self, now: u64) -> bool {
        let rrd = self
            .activates
            .back()
            .is_none_or(|&t| now >= t + self.spec.t_rrd);
        let faw = self.activates.len() < 4
            || self.spec.t_faw == 0
            || now >= self.activates[0] + self.spec.t_faw;
        rrd && faw
    }

    /// Whether a column command for a read (`write` false) or write may issue at `now`
    /// (tCCD, tWTR).
    fn may_column(&self, now: u64, write: bool) -> bool {
        let ccd = self.last_column.is_none_or(|t| now >= t + self.spec.t_ccd);
        ccd && (write || self.spec.t_wtr == 0 || now >= self.write_end + self.spec.t_wtr)
    }

    /// One DRAM cycle of scheduling. Returns true when a command was issued.
    pub fn tick(&mut self, now: u64) -> bool {
        self.stats.cycles += 1;
        if self.queue.is_empty() || now < self.quiet_until {
            return false;
        }
        if self.refresh(now) {
            return false;
        }
        let progressed = self.schedule(now);
        self.quiet_until = self.next_command_at(now);
        progressed
    }

    /// The earliest cycle at which [`DramChannel::schedule`] could issue a command, after
    /// `now`, when no request arrives meanwhile. Each check of a command compares the cycle
    /// with a time the channel holds, and the queue's order does not depend on the cycle,
    /// so a command is possible only once all of its own times have passed
    /// ([`DramChannel::ready_at`]); a refresh falls due at `next_refresh`.
    fn next_command_at(&self, now: u64) -> u64 {
        let times = self.command_times();
        let mut next = if self.spec.t_refi != 0 {
            self.next_refresh
        } else {
            u64::MAX
        };
        for e in &self.queue {
            next = next.min(self.ready_at(&times, e.bank, e.row, e.req.write));
        }
        next.max(now + 1)
    }

    /// The channel-wide times a command waits for: a read's and a write's column command
    /// (the bus free when its data would start `tCL` later, tCCD, and tWTR for a read) and
    /// an activate (tRRD, tFAW).
    fn command_times(&self) -> CommandTimes {
        let spec = &self.spec;
        let mut write = self.bus_free.saturating_sub(spec.t_cl);
        if let Some(t) = self.last_column {
            write = write.max(t + spec.t_ccd);
        }
        let read = if spec.t_wtr == 0 {
            write
        } else {
            write.max(self.write_end + spec.t_wtr)
        };
        let mut activate = self.activates.back().map_or(0, |&t| t + spec.t_rrd);
        if self.activates.len() == 4 && spec.t_faw != 0 {
            activate = activate.max(self.activates[0] + spec.t_faw);
        }
        CommandTimes {
            read,
            write,
            activate,
        }
    }

    /// When a queued request to `bank`'s `row` could next take a command: a hit of the open
    /// row its column command; in a bank no queued request hits, a precharge (open) or an
    /// activate (closed); never while its bank has hits and it is not one (`u64::MAX`: the
    /// bank's hits go first, and their own times say when).
    fn ready_at(&self, times: &CommandTimes, bank: u32, row: u64, write: bool) -> u64 {
        // Selects, not branches (as in the scheduler's scans).
        let b = &self.banks[bank as usize];
        let column = b
            .col_ready
            .max(select_unpredictable(write, times.write, times.read));
        let row_command = select_unpredictable(
            b.open_row.is_some(),
            b.pre_ready,
            b.act_ready.max(times.activate),
        );
        let other = select_unpredictable(b.hits > 0, u64::MAX, row_command);
        select_unpredictable(b.open_row == Some(row), column, other)
    }

    /// The cycle's two scheduling phases (column, then row). Returns true when a command
    /// was issued.
    fn schedule(&mut self, now: u64) -> bool {
        self.debug_check_bank_counts();
        let mut progressed = false;
        // Column phase: the best ready row hit, if the bus is free when its data would start
        // (and some bank has a queued hit whose column is ready: else the scan finds none).
        if self.bus_free <= now + self.spec.t_cl
            && self.any_busy_bank(|b| b.hits > 0 && b.col_ready <= now)
        {
            let (read_ok, write_ok) = (self.may_column(now, false), self.may_column(now, true));
            // Requests in the bus's current direction first, until the batch is full.
            let keep = self.last_column.is_some() && self.streak < DIRECTION_BATCH;
            let last_was_write = self.last_was_write;
            // The scan decides with selects, not branches: which entries qualify follows
            // the traffic and would be mispredicted.
            let mut best = (u64::MAX, usize::MAX);
            for (i, e) in self.queue.iter().enumerate() {
                let b = &self.banks[e.bank as usize];
                let write = e.req.write;
                let ok = (b.open_row == Some(e.row))
                    & (b.col_ready <= now)
                    & select_unpredictable(write, write_ok, read_ok);
                let turns = u64::from(keep & (write != last_was_write)) * TURNS;
                let key = select_unpredictable(ok, e.order | turns, u64::MAX);
                if key < best.0 {
                    best = (key, i);
                }
            }
            let best = (best.0 != u64::MAX).then_some(best.1);
            if let Some(i) = best {
                let e = self.queue.swap_remove(i);
                self.column(now, e);
                progressed = true;
            }
        }
        // Row phase: open the row of the best request whose row is not open, in a bank
        // with no queued hit. Skipped when no bank with requests could take the command.
        let may_activate = self.may_activate(now);
        let row_ready = |b: &Bank| {
            select_unpredictable(
                b.open_row.is_some(),
                b.pre_ready <= now,
                (b.act_ready <= now) & may_activate,
            )
        };
        if !self.any_busy_bank(|b| b.queued > 0 && b.hits == 0 && row_ready(b)) {
            return progressed;
        }
        let mut best = (u64::MAX, usize::MAX);
        for (i, e) in self.queue.iter().enumerate() {
            let b = &self.banks[e.bank as usize];
            let key = select_unpredictable((b.hits == 0) & row_ready(b), e.order, u64::MAX);
            if key < best.0 {
                best = (key, i);
            }
        }
        if best.0 != u64::MAX {
            let i = best.1;
            let (bank, row) = (self.queue[i].bank as usize, self.queue[i].row);
            self.queue[i].needed_activate = true;
            let b = &mut self.banks[bank];
            if b.open_row.is_some() {
                // Only a bank no queued request hits is precharged: its `hits` is 0 already.
                debug_assert_eq!(b.hits, 0);
                b.open_row = None;
                b.act_ready = now + self.spec.t_rp;
                self.stats.precharges += 1;
            } else {
                b.open_row = Some(row);
                b.hits = self
                    .queue
                    .iter()
                    .filter(|e| e.bank as usize == bank && e.row == row)
                    .count() as u32;
                b.col_ready = b.col_ready.max(now + self.spec.t_rcd);
                b.pre_ready = b.pre_ready.max(now + self.spec.t_ras);
                self.stats.activates += 1;
                if self.activates.len() == 4 {
                    self.activates.pop_front();
                }
                self.activates.push_back(now);
            }
            progressed = true;
        }
        progressed
    }

    /// In debug builds: each bank's `queued` and `hits` are what the queue holds.
    fn debug_check_bank_counts(&self) {
        if cfg!(debug_assertions) {
            for (k, b) in self.banks.iter().enumerate() {
                let mine = || self.queue.iter().filter(|e| e.bank as usize == k);
                let hits = mine().filter(|e| b.open_row == Some(e.row)).count() as u32;
                debug_assert_eq!(
                    (b.queued, b.hits),
                    (mine().count() as u32, hits),
                    "bank {k}"
                );
                debug_assert_eq!(
                    self.busy_banks[k / 64] >> (k % 64) & 1 == 1,
                    b.queued > 0,
                    "bank {k}'s bit"
                );
            }
        }
    }

    fn column(&mut self, now: u64, e: Entry<T>) {
        let burst = self.spec.burst_cycles(e.req.bytes);
        let mut start = (now + self.spec.t_cl).max(self.bus_free);
        let write = e.req.write;
        if write && !self.last_was_write && self.read_end > 0 {
            // Read-to-write: the bus turns around after the last read burst.
            start = start.max(self.read_end + self.spec.t_rtw);
        }
        if write != self.last_was_write && self.last_column.is_some() {
            self.stats.turnarounds += 1;
            self.streak = 0;
        }
        self.streak += 1;
        let end = start + burst;
        self.bus_free = end;
        self.last_column = Some(now);
        self.last_was_write = write;
        if write {
            self.write_end = end;
        } else {
            self.read_end = end;
        }
        let b = &mut self.banks[e.bank as usize];
        // The request was a hit of its bank's open row.
        b.queued -= 1;
        b.hits -= 1;
        if b.queued == 0 {
            self.busy_banks[e.bank as usize / 64] &= !(1 << (e.bank % 64));
        }
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
            t_ccd: 0,
            t_rrd: 0,
            t_faw: 0,
            t_wtr: 0,
            t_rtw: 0,
            t_refi: 0,
            t_rfc: 0,
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

    /// When each of `reads` (address, tag) returns, all enqueued at cycle 0 on `s`.
    fn returns(s: &DramSpec, reqs: &[DramRequest<u32>]) -> Vec<(u64, u32)> {
        let mut ch = DramChannel::new(s.clone());
        for r in reqs {
            ch.try_enqueue(r.clone()).unwrap();
        }
        let mut out = Vec::new();
        run(&mut ch, 0, &mut out);
        out
    }

    fn write(addr: u64, tag: u32) -> DramRequest<u32> {
        DramRequest {
            write: true,
            ..read(addr, tag)
        }
    }

    #[test]
    fn activates_keep_t_rrd_apart_and_four_per_t_faw() {
        // Five reads to five closed banks: activates one per cycle without constraints.
        let mut s = spec();
        s.banks = 8;
        s.bus_bytes_per_cycle = 128; // one-cycle bursts: the bus does not space them
        let reqs: Vec<_> = (0..5).map(|b| read(b * 2048, b as u32)).collect();
        let by_tag = |mut r: Vec<(u64, u32)>| {
            r.sort_by_key(|&(_, tag)| tag);
            r
        };
        let free = by_tag(returns(&s, &reqs));
        s.t_rrd = 6;
        let rrd = by_tag(returns(&s, &reqs));
        // The fifth activate waits 4 × t_rrd instead of 4 cycles.
        assert_eq!(rrd[4].0 - free[4].0, 4 * 6 - 4);
        s.t_faw = 40;
        let faw = by_tag(returns(&s, &reqs));
        // The fifth activate waits for the first plus t_faw (40) instead of 4 × t_rrd (24).
        assert_eq!(faw[4].0 - rrd[4].0, 40 - 24);
        assert_eq!(faw[..4], rrd[..4]);
    }

    #[test]
    fn column_commands_keep_t_ccd_apart() {
        let mut s = spec();
        s.bus_bytes_per_cycle = 128; // one-cycle bursts: the bus does not space them
        let reqs = [read(0, 0), read(128, 1)];
        let free = returns(&s, &reqs);
        s.t_ccd = 5;
        let ccd = returns(&s, &reqs);
        assert_eq!(free[1].0 - free[0].0, 1);
        assert_eq!(ccd[1].0 - ccd[0].0, 5);
    }

    #[test]
    fn reads_after_writes_and_writes_after_reads_turn_the_bus_around() {
        let mut s = spec();
        // A write, then a read of the same open row: the read waits t_wtr after the write
        // burst.
        let reqs = [write(0, 0), read(128, 1)];
        let free = returns(&s, &reqs);
        s.t_wtr = 7;
        let wtr = returns(&s, &reqs);
        let burst = s.burst_cycles(128);
        // Without tWTR the read's column command follows the write's by the burst length;
        // with it, by t_cl + burst + t_wtr (the write's data end, then the turnaround).
        assert_eq!(wtr[0].0 - free[0].0, s.t_cl + 7);
        let mut ch = DramChannel::new(s.clone());
        ch.try_enqueue(read(0, 0)).unwrap();
        ch.try_enqueue(write(128, 1)).unwrap();
        run(&mut ch, 0, &mut Vec::new());
        let read_end = ch.read_end;
        assert_eq!(ch.write_end, read_end + burst);
        s.t_rtw = 3;
        let mut ch = DramChannel::new(s);
        ch.try_enqueue(read(0, 0)).unwrap();
        ch.try_enqueue(write(128, 1)).unwrap();
        run(&mut ch, 0, &mut Vec::new());
        assert_eq!(ch.write_end, read_end + 3 + burst);
        assert_eq!(ch.stats().turnarounds, 1);
    }

    #[test]
    fn reads_and_writes_are_served_in_batches() {
        let mut ch = DramChannel::new(spec());
        let mut out = Vec::new();
        ch.try_enqueue(read(0, 0)).unwrap();
        let t = run(&mut ch, 0, &mut out);
        // The bus last read: two younger reads of the open row go before an older write.
        ch.try_enqueue(write(128, 1)).unwrap();
        ch.try_enqueue(read(256, 2)).unwrap();
        ch.try_enqueue(read(384, 3)).unwrap();
        run(&mut ch, t, &mut out);
        assert!(ch.write_end > ch.read_end, "the write went first");
        assert_eq!(ch.stats().turnarounds, 1);
    }

    #[test]
    fn refresh_closes_every_bank_for_t_rfc() {
        let mut s = spec();
        s.t_refi = 100;
        s.t_rfc = 50;
        let mut ch = DramChannel::new(s.clone());
        let mut out = Vec::new();
        ch.try_enqueue(read(0, 0)).unwrap();
        run(&mut ch, 0, &mut out);
        // A row hit due at cycle 100 finds its row closed and the banks refreshing: it waits
        // t_rp + t_rfc, then activates.
        ch.try_enqueue(read(128, 1)).unwrap();
        out.clear();
        run(&mut ch, 100, &mut out);
        assert_eq!(out[0].0 - 100, s.t_rp + 50 + s.row_closed_latency(128));
        assert_eq!(ch.stats().refreshes, 1);
        // Refreshes due while the channel idled (at 200, 300, 400) happened on time: a request
        // at 450 waits only for the one at 400 to end (400 + t_rp + t_rfc = 462).
        ch.try_enqueue(read(0, 2)).unwrap();
        out.clear();
        run(&mut ch, 450, &mut out);
        assert_eq!(out[0].0, 462 + s.row_closed_latency(128));
        assert_eq!(ch.stats().refreshes, 4);
        assert_eq!(ch.next_refresh, 500);
    }

    /// A channel that skips its quiet cycles (`quiet_until`) issues every command at the
    /// cycle a channel scheduling every cycle does: same returns at the same cycles, same
    /// counters, under random traffic (reads and writes, both classes, a few rows per bank)
    /// with every timing constraint and refresh on, arriving in bursts and lulls.
    #[test]
    fn skipping_quiet_cycles_changes_nothing() {
        let mut s = spec();
        (s.t_ccd, s.t_rrd, s.t_faw, s.t_wtr, s.t_rtw) = (2, 3, 20, 5, 4);
        (s.t_refi, s.t_rfc) = (700, 40);
        s.queue_entries = 8;
        for seed in 1..=12u64 {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut next = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut skipping = DramChannel::new(s.clone());
            let mut every = DramChannel::new(s.clone());
            let (mut out_skip, mut out_every) = (Vec::new(), Vec::new());
            let (mut tag, mut skipped) = (0, 0);
            for now in 0..6000 {
                // Bursts: a busy phase offers up to two requests a cycle, a lull none.
                let offers = if now / 500 % 2 == 0 { next(3) } else { 0 };
                for _ in 0..offers {
                    let req = DramRequest {
                        local_addr: next(3) * 2048 * 4 + next(4) * 2048 + next(16) * 128,
                        bytes: if next(4) == 0 { 64 } else { 128 },
                        write: next(3) == 0,
                        priority: if next(8) == 0 {
                            Priority::Context
                        } else {
                            Priority::Normal
                        },
                        payload: tag,
                    };
                    if skipping.can_accept() {
                        skipping.try_enqueue(req.clone()).unwrap();
                        every.try_enqueue(req).unwrap();
                        tag += 1;
                    }
                }
                if !skipping.queue.is_empty() && now < skipping.quiet_until {
                    skipped += 1;
                }
                skipping.tick(now);
                every.quiet_until = 0;
                every.tick(now);
                while let Some(p) = skipping.pop_return(now) {
                    out_skip.push((now, p));
                }
                while let Some(p) = every.pop_return(now) {
                    out_every.push((now, p));
                }
            }
            // Enough traffic, and cycles with requests waiting that were skipped.
            assert!(
                out_every.len() > 200,
                "seed {seed}: {} reads",
                out_every.len()
            );
            assert!(skipped > 1000, "seed {seed}: {skipped} cycles skipped");
            assert_eq!(out_skip, out_every, "seed {seed}");
            assert_eq!(skipping.stats(), every.stats(), "seed {seed}");
        }
    }
}
