//! Bounded queues with latency: the only way two timing components talk.
//!
//! Follows the Akita/MGPUSim port discipline (STYLE.md): a queue has a capacity and a latency,
//! [`DelayQueue::try_send`] hands the message back when the queue is full (back-pressure) and
//! [`DelayQueue::recv`] yields only messages whose ready time has come. Every hop costs at least
//! one cycle, so a message pushed during cycle `c` is never visible before cycle `c + 1`: the
//! order in which components are ticked within one instant cannot change what they see.
//!
//! Timestamps are cycles of *one* clock domain, stated by the owner of each queue (for a queue
//! that crosses domains, the producer's domain; the consumer converts the global time to that
//! domain's cycle count with [`crate::clock::ClockSpec::cycle_at`]).
//!
//! Invariants: `len() <= capacity()`; messages leave in the order they entered (FIFO), so a
//! message whose ready time has come can still wait behind an older one that is not ready.

use std::collections::VecDeque;

/// A bounded FIFO whose messages become visible `latency` cycles after they were sent.
#[derive(Debug, Clone)]
pub struct DelayQueue<T> {
    buf: VecDeque<(u64, T)>,
    /// The oldest message's ready time (`u64::MAX` when empty), kept beside the queue so
    /// that asking whether anything is ready reads no message: most queues are asked
    /// every cycle and answer no.
    head_ready: u64,
    capacity: usize,
    latency: u64,
}

/// The name the style guide uses for a component's input or output queue.
pub type Port<T> = DelayQueue<T>;

impl<T> DelayQueue<T> {
    /// A queue holding at most `capacity` messages (at least 1), each visible `latency` cycles
    /// after it was sent (at least 1: every hop costs a cycle).
    pub fn new(capacity: usize, latency: u64) -> Self {
        let capacity = capacity.max(1);
        Self {
            buf: VecDeque::with_capacity(capacity.min(4096)),
            head_ready: u64::MAX,
            capacity,
            latency: latency.max(1),
        }
    }

    /// Sends `msg` at cycle `now`; it becomes visible at `now + latency`.
    ///
    /// Returns the message back when the queue is full.
    pub fn try_send(&mut self, now: u64, msg: T) -> Result<(), T> {
        self.try_send_at(now + self.latency, msg)
    }

    /// Sends `msg` to become visible at cycle `ready` (the caller guarantees `ready` is at least
    /// one cycle after its current cycle). Used where the delay depends on the message, e.g. a
    /// packet's serialisation time on a link. Returns the message back when the queue is full.
    pub fn try_send_at(&mut self, ready: u64, msg: T) -> Result<(), T> {
        if self.buf.len() >= self.capacity {
            return Err(msg);
        }
        if self.buf.is_empty() {
            self.head_ready = ready;
        }
        self.buf.push_back((ready, msg));
        Ok(())
    }

    /// Removes and returns the oldest message if its ready time is `<= now`.
    #[inline]
    pub fn recv(&mut self, now: u64) -> Option<T> {
        if self.head_ready > now {
            return None;
        }
        let (_, m) = self.buf.pop_front().expect("a ready head");
        self.head_ready = self.buf.front().map_or(u64::MAX, |&(r, _)| r);
        Some(m)
    }

    /// The oldest message if it is ready at `now`, without removing it.
    #[inline]
    pub fn peek(&self, now: u64) -> Option<&T> {
        if self.head_ready > now {
            return None;
        }
        self.buf.front().map(|(_, m)| m)
    }

    /// The ready time of the oldest message, ready or not.
    pub fn next_ready(&self) -> Option<u64> {
        (!self.buf.is_empty()).then_some(self.head_ready)
    }

    /// Messages held (ready or not).
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// True when a send would be refused.
    pub fn is_full(&self) -> bool {
        self.buf.len() >= self.capacity
    }

    /// How many more messages fit.
    pub fn free(&self) -> usize {
        self.capacity - self.buf.len()
    }

    /// The maximum number of messages held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The latency added by [`DelayQueue::try_send`].
    pub fn latency(&self) -> u64 {
        self.latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_and_backpressure() {
        let mut q = DelayQueue::new(2, 3);
        assert!(q.try_send(10, 'a').is_ok());
        assert!(q.try_send(11, 'b').is_ok());
        assert_eq!(q.try_send(11, 'c'), Err('c'));
        assert_eq!(q.recv(12), None);
        assert_eq!(q.recv(13), Some('a'));
        assert_eq!(q.recv(13), None);
        assert_eq!(q.recv(14), Some('b'));
        assert!(q.is_empty());
    }

    #[test]
    fn zero_latency_is_one_cycle() {
        let mut q = DelayQueue::new(1, 0);
        q.try_send(5, 1u8).unwrap();
        assert_eq!(q.recv(5), None);
        assert_eq!(q.recv(6), Some(1));
    }
}
