//! Kernel analyses for preemption (liveness, loops, preemption points, idempotence).
