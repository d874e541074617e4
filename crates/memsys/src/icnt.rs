//! The interconnect: a crossbar with input queueing, used twice — once for SM→L2 requests and
//! once for L2→SM replies, as two separate resources (papers/lin-thesis §3.2.2, §4.1; Table 4.1:
//! "Two 16*16 crossbars, 32B flit size").
//!
//! Model (papers/lin-thesis §3.2.2): the crossbar is non-blocking — a connection is made when
//! both its input and its output are idle — with queueing on the inputs. When several inputs
//! hold packets for the same output, one is accepted per cycle and the others wait at the head
//! of their input queue (head-of-line blocking), which is why the sustainable throughput under
//! uniform traffic is about 60 % of peak (Karol et al., cited there as Fig. 3.3b).
//!
//! * A packet is `ceil((header_bytes + data_bytes) / flit_bytes)` flits: a read request is a
//!   header only; a write request and a read reply carry their data (papers/lin-thesis §4.3.1
//!   measures bandwidth in 32 B flits).
//! * A port moves `flits_per_cycle` flits per interconnect cycle, so a granted packet holds its
//!   input and its output for `ceil(flits / flits_per_cycle)` cycles (serialisation).
//! * After its last flit leaves, a packet becomes visible in the output's ejection buffer
//!   `latency` cycles later. A full ejection buffer refuses grants: back-pressure reaches the
//!   inputs, and a full input queue refuses injection.
//! * Each input has one queue per [`Priority`]; an output grants a `Normal` packet before a
//!   `Context` one (papers/lin-lightweight §V: context-switch traffic has lower priority), and
//!   among equals goes round-robin over inputs starting after the last one it granted. Outputs
//!   are arbitrated in an order that rotates every cycle.
//!
//! Invariants: a packet is never visible at its output in the cycle it was injected; an input
//! or output carries at most one packet at a time; per input and class, packets leave in FIFO
//! order.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::port::DelayQueue;
use crate::Priority;

/// The fixed description of one crossbar network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcntSpec {
    /// Bytes per flit (the width of a port).
    pub flit_bytes: u32,
    /// Bytes of header (address, command, ids) in every packet.
    pub header_bytes: u32,
    /// Flits a port (input or output) moves per interconnect cycle.
    pub flits_per_cycle: u32,
    /// Interconnect cycles from a packet's last flit leaving its input until it is visible at
    /// its output (at least 1).
    pub latency: u64,
    /// Packets each input queue holds, per priority class.
    pub input_buffer: usize,
    /// Packets each output ejection buffer holds.
    pub output_buffer: usize,
}

impl IcntSpec {
    /// Flits of a packet carrying `data_bytes` of data.
    pub fn flits(&self, data_bytes: u32) -> u32 {
        (self.header_bytes + data_bytes)
            .div_ceil(self.flit_bytes.max(1))
            .max(1)
    }

    /// Cycles a packet of `flits` flits holds its input and output.
    pub fn serialisation(&self, flits: u32) -> u64 {
        u64::from(flits.div_ceil(self.flits_per_cycle.max(1)))
    }

    /// Unloaded cycles from injection (at cycle `c`) to visibility at the output: one cycle to
    /// enter the input queue, then serialisation and latency.
    pub fn unloaded_latency(&self, data_bytes: u32) -> u64 {
        self.serialisation(self.flits(data_bytes)) + self.latency.max(1)
    }
}

/// Counters of one network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IcntStats {
    /// Interconnect cycles simulated.
    pub cycles: u64,
    /// Packets delivered to an output buffer.
    pub packets: u64,
    /// Flits moved.
    pub flits: u64,
    /// Sum over outputs of the cycles each was transmitting.
    pub output_busy_cycles: u64,
    /// Sum over inputs of the cycles a ready head packet waited for a busy or full output
    /// (output contention).
    pub blocked_input_cycles: u64,
    /// Injections refused because the input queue was full.
    pub inject_refusals: u64,
    /// Context-priority packets delivered.
    pub context_packets: u64,
}

impl IcntStats {
    /// The counts between the snapshot `earlier` and `self` (counters only grow).
    pub fn since(&self, earlier: &IcntStats) -> IcntStats {
        IcntStats {
            cycles: self.cycles - earlier.cycles,
            packets: self.packets - earlier.packets,
            flits: self.flits - earlier.flits,
            output_busy_cycles: self.output_busy_cycles - earlier.output_busy_cycles,
            blocked_input_cycles: self.blocked_input_cycles - earlier.blocked_input_cycles,
            inject_refusals: self.inject_refusals - earlier.inject_refusals,
            context_packets: self.context_packets - earlier.context_packets,
        }
    }

    /// Fraction of output-port cycles spent transmitting (0 when nothing was simulated).
    pub fn utilisation(&self, outputs: usize) -> f64 {
        if self.cycles == 0 || outputs == 0 {
            return 0.0;
        }
        self.output_busy_cycles as f64 / (self.cycles as f64 * outputs as f64)
    }
}

/// A packet waiting at an input.
#[derive(Debug, Clone)]
pub struct Packet<T> {
    /// Output port.
    pub dest: usize,
    /// Size in flits.
    pub flits: u32,
    /// Arbitration class.
    pub priority: Priority,
    /// What is carried.
    pub payload: T,
}

/// The queues of one input port: one FIFO per priority class, each entry stamped with the
/// cycle from which it may be granted.
type InputQueues<T> = [VecDeque<(u64, Packet<T>)>; 2];

/// One crossbar network with its state and counters.
#[derive(Debug, Clone)]
pub struct Crossbar<T> {
    spec: IcntSpec,
    inputs: Vec<InputQueues<T>>,
    in_busy: Vec<u64>,
    out_busy: Vec<u64>,
    rr: Vec<usize>,
    outputs: Vec<DelayQueue<T>>,
    queued: usize,
    /// One bit per input holding a packet (either class), so that a cycle visits only
    /// those (most inputs of a large GPU's networks are empty in most cycles).
    occupied: Vec<u64>,
    /// Scratch of `tick`: per output and class, the inputs requesting it.
    requests: Vec<Vec<u32>>,
    /// Scratch of `tick`: the outputs some input requests this cycle, each once.
    requested: Vec<u32>,
    stats: IcntStats,
}

impl<T> Crossbar<T> {
    /// A crossbar with `inputs` input and `outputs` output ports.
    pub fn new(spec: IcntSpec, inputs: usize, outputs: usize) -> Self {
        let cap = spec.input_buffer.max(1);
        Self {
            inputs: (0..inputs)
                .map(|_| [VecDeque::with_capacity(cap), VecDeque::with_capacity(cap)])
                .collect(),
            in_busy: vec![0; inputs],
            out_busy: vec![0; outputs],
            rr: vec![0; outputs],
            outputs: (0..outputs)
                .map(|_| DelayQueue::new(spec.output_buffer, spec.latency))
                .collect(),
            queued: 0,
            occupied: vec![0; inputs.div_ceil(64)],
            requests: (0..outputs * 2)
                .map(|_| Vec::with_capacity(inputs))
                .collect(),
            requested: Vec::with_capacity(outputs),
            stats: IcntStats::default(),
            spec,
        }
    }

    /// The fixed description.
    pub fn spec(&self) -> &IcntSpec {
        &self.spec
    }

    /// The counters.
    pub fn stats(&self) -> &IcntStats {
        &self.stats
    }

    /// Number of output ports.
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }

    /// True when input `input` can take a packet of class `priority`.
    pub fn can_inject(&self, input: usize, priority: Priority) -> bool {
        self.inputs[input][priority.class()].len() < self.spec.input_buffer.max(1)
    }

    /// Free slots of input `input` for class `priority`.
    pub fn input_free(&self, input: usize, priority: Priority) -> usize {
        self.spec.input_buffer.max(1) - self.inputs[input][priority.class()].len()
    }

    /// Puts a packet into input `input` at interconnect cycle `now`; it may be granted from
    /// `now + 1`. Returns it back when the input queue is full.
    pub fn try_inject(
        &mut self,
        now: u64,
        input: usize,
        packet: Packet<T>,
    ) -> Result<(), Packet<T>> {
        debug_assert!(packet.dest < self.outputs.len());
        if !self.can_inject(input, packet.priority) {
            self.stats.inject_refusals += 1;
            return Err(packet);
        }
        self.inputs[input][packet.priority.class()].push_back((now + 1, packet));
        self.queued += 1;
        self.occupied[input / 64] |= 1 << (input % 64);
        Ok(())
    }

    /// Puts a packet its sender already checked room for ([`Crossbar::input_free`]) into
    /// input `input`, to be granted from interconnect cycle `ready` (at least one cycle
    /// after the cycle it was sent in).
    pub fn inject_checked(&mut self, ready: u64, input: usize, packet: Packet<T>) {
        debug_assert!(packet.dest < self.outputs.len());
        debug_assert!(
            self.can_inject(input, packet.priority),
            "room checked by the sender"
        );
        self.inputs[input][packet.priority.class()].push_back((ready, packet));
        self.queued += 1;
        self.occupied[input / 64] |= 1 << (input % 64);
    }

    /// Takes the oldest packet visible at output `output` at interconnect cycle `now`.
    pub fn recv(&mut self, now: u64, output: usize) -> Option<T> {
        self.outputs[output].recv(now)
    }

    /// The oldest packet visible at output `output`, left in place.
    pub fn peek(&self, now: u64, output: usize) -> Option<&T> {
        self.outputs[output].peek(now)
    }

    /// True when no packet is queued, in flight or waiting in an output buffer.
    pub fn is_idle(&self) -> bool {
        self.queued == 0 && self.outputs.iter().all(DelayQueue::is_empty)
    }

    /// One interconnect cycle of arbitration. Returns true when a packet was granted.
    ///
    /// Equivalent to letting every output (in the rotating order) scan the inputs round-robin
    /// from the one after its last grant, class by class, for an idle input whose ready head
    /// packet is addressed to it; built input-first so that a cycle costs one pass over the
    /// inputs plus the requests actually present, not inputs × outputs × classes.
    pub fn tick(&mut self, now: u64) -> bool {
        self.stats.cycles += 1;
        if self.queued == 0 {
            return false;
        }
        let n_out = self.outputs.len();
        let n_in = self.inputs.len();
        // Requests: per output and class, the idle inputs whose ready head goes there, in
        // ascending input order; `requested` lists the outputs that have any (the lists of
        // the others stay empty from the last cycle).
        for &o in &self.requested {
            self.requests[o as usize * 2].clear();
            self.requests[o as usize * 2 + 1].clear();
        }
        self.requested.clear();
        // Idle inputs with a ready head: each is granted once or counts as blocked.
        let mut requesting = 0;
        // The occupied inputs in ascending order (an empty one has no head to request with).
        for w in 0..self.occupied.len() {
            let mut bits = self.occupied[w];
            while bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.in_busy[i] > now {
                    continue;
                }
                let mut ready_head = false;
                for class in 0..2 {
                    if let Some((ready, p)) = self.inputs[i][class].front() {
                        if *ready <= now {
                            ready_head = true;
                            // An output busy or full this cycle grants nobody: its request
                            // only counts (a blocked input), listed or not.
                            let o = p.dest;
                            if self.out_busy[o] > now || self.outputs[o].is_full() {
                                continue;
                            }
                            if self.requests[o * 2].is_empty()
                                && self.requests[o * 2 + 1].is_empty()
                            {
                                self.requested.push(o as u32);
                            }
                            self.requests[o * 2 + class].push(i as u32);
                        }
                    }
                }
                requesting += u64::from(ready_head);
            }
        }
        if requesting == 0 {
            return false;
        }
        let mut granted = 0;
        // Outputs in turn from a rotating start (`now` modulo the outputs); only the
        // requested ones can grant.
        let start = (now % n_out as u64) as usize;
        let turn = |o: &u32| (*o as usize + n_out - start) % n_out;
        if self.requested.len() > 1 {
            self.requested.sort_unstable_by_key(turn);
        }
        for k in 0..self.requested.len() {
            let o = self.requested[k] as usize;
            // Listed only when idle with room (checked above; a grant changes only its own
            // output, granted once).
            debug_assert!(self.out_busy[o] <= now && !self.outputs[o].is_full());
            let mut chosen = None;
            for class in 0..2 {
                let reqs = &self.requests[o * 2 + class];
                if reqs.is_empty() {
                    continue;
                }
                // The first idle requester at or after `rr[o]`, wrapping around.
                let rr = self.rr[o] as u32;
                let idle = |i: &&u32| self.in_busy[**i as usize] <= now;
                let pick = reqs
                    .iter()
                    .filter(|&&i| i >= rr)
                    .find(idle)
                    .or_else(|| reqs.iter().filter(|&&i| i < rr).find(idle));
                if let Some(&i) = pick {
                    chosen = Some((i as usize, class));
                    break;
                }
            }
            let Some((i, class)) = chosen else { continue };
            let (_, p) = self.inputs[i][class].pop_front().expect("chosen head");
            self.queued -= 1;
            if self.inputs[i][0].is_empty() && self.inputs[i][1].is_empty() {
                self.occupied[i / 64] &= !(1 << (i % 64));
            }
            let ser = self.spec.serialisation(p.flits);
            // At least one cycle (a packet has a flit), so the input is granted once.
            debug_assert!(ser > 0);
            self.in_busy[i] = now + ser;
            self.out_busy[o] = now + ser;
            self.rr[o] = (i + 1) % n_in;
            self.stats.packets += 1;
            self.stats.flits += u64::from(p.flits);
            self.stats.output_busy_cycles += ser;
            if p.priority == Priority::Context {
                self.stats.context_packets += 1;
            }
            let ready = now + ser - 1 + self.spec.latency.max(1);
            if self.outputs[o].try_send_at(ready, p.payload).is_err() {
                unreachable!("output buffer checked before the grant");
            }
            granted += 1;
        }
        // Output contention: idle inputs still holding a ready head after arbitration — the
        // requesting inputs not granted (a grant makes its input busy, so each input is
        // granted at most once).
        self.stats.blocked_input_cycles += requesting - granted;
        granted > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> IcntSpec {
        IcntSpec {
            flit_bytes: 32,
            header_bytes: 8,
            flits_per_cycle: 1,
            latency: 4,
            input_buffer: 8,
            output_buffer: 8,
        }
    }

    fn pkt(dest: usize, flits: u32, priority: Priority, tag: u32) -> Packet<u32> {
        Packet {
            dest,
            flits,
            priority,
            payload: tag,
        }
    }

    #[test]
    fn unloaded_latency_and_flits() {
        let s = spec();
        assert_eq!(s.flits(0), 1);
        assert_eq!(s.flits(128), 5);
        let mut x = Crossbar::new(s.clone(), 2, 2);
        x.try_inject(0, 0, pkt(1, 5, Priority::Normal, 7)).unwrap();
        let mut t = 0;
        loop {
            t += 1;
            x.tick(t);
            if let Some(v) = x.recv(t, 1) {
                assert_eq!(v, 7);
                break;
            }
        }
        assert_eq!(t, s.unloaded_latency(128));
    }

    #[test]
    fn output_contention_serialises() {
        let mut x = Crossbar::new(spec(), 4, 2);
        for i in 0..4 {
            x.try_inject(0, i, pkt(0, 1, Priority::Normal, i as u32))
                .unwrap();
        }
        let mut got = Vec::new();
        for t in 1..20 {
            x.tick(t);
            while let Some(v) = x.recv(t, 0) {
                got.push((t, v));
            }
        }
        let times: Vec<u64> = got.iter().map(|g| g.0).collect();
        assert_eq!(times, vec![5, 6, 7, 8]);
        assert!(x.stats().blocked_input_cycles >= 6);
    }

    #[test]
    fn normal_beats_context() {
        let mut x = Crossbar::new(spec(), 2, 1);
        x.try_inject(0, 0, pkt(0, 1, Priority::Context, 1)).unwrap();
        x.try_inject(0, 1, pkt(0, 1, Priority::Normal, 2)).unwrap();
        let mut got = Vec::new();
        for t in 1..20 {
            x.tick(t);
            while let Some(v) = x.recv(t, 0) {
                got.push(v);
            }
        }
        assert_eq!(got, vec![2, 1]);
    }
}
