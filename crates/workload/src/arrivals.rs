//! Requests of a latency-critical process (issue "Multiprogrammed GPUs", item 6): when
//! they arrive. Inference-serving studies (REEF, Orion, XSched, LithOS) measure the latency
//! of requests that arrive on their own schedule beside batch or training work; a
//! scenario's `requests` gives a process such a schedule, and each request runs the
//! process's program once ([`crate::system`]).
//!
//! ```toml
//! requests = { kind = "periodic", every_us = 20.0, count = 50 }   # at 0, 20, 40, ... µs
//! requests = { kind = "poisson", mean_us = 20.0, count = 50, seed = 7 }
//! requests = { kind = "trace", at_us = [0.0, 3.5, 40.0] }         # as recorded
//! ```
//!
//! Times are offsets from the process's `arrival_us`. Poisson arrivals have independent
//! exponential gaps of mean `mean_us` drawn from `seed` (splitmix64, [`suite::Rng`]), the
//! first request one gap after the arrival; the same seed gives the same times everywhere.
//! Written as the policies are: a table tagged by `kind`, kebab-case, and a field a kind
//! does not have, or a value out of range, is an error naming it.

use serde::Deserialize;

/// The most requests a process may be given.
pub const MAX_REQUESTS: u32 = 100_000;

/// The latest a request may arrive after its process, µs (as `arrival_us`).
pub const MAX_REQUEST_OFFSET_US: f64 = 1.0e9;

/// When a process's requests arrive.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Arrivals {
    /// `count` requests, `every_us` apart, the first at the process's arrival.
    Periodic { every_us: f64, count: u32 },
    /// `count` requests with exponential gaps of mean `mean_us` (a Poisson process of rate
    /// `1 / mean_us`), drawn from `seed`.
    Poisson {
        mean_us: f64,
        count: u32,
        #[serde(default)]
        seed: u64,
    },
    /// Requests at these offsets, in order.
    Trace { at_us: Vec<f64> },
}

impl Arrivals {
    /// Reads `requests` as written, checking every value: `Err` says which and why.
    pub fn from_value(v: toml::Value) -> Result<Arrivals, String> {
        let a = Arrivals::deserialize(v).map_err(|e| e.message().trim_end().to_string())?;
        a.check()?;
        Ok(a)
    }

    fn check(&self) -> Result<(), String> {
        let count = |n: u32| {
            if (1..=MAX_REQUESTS).contains(&n) {
                Ok(())
            } else {
                Err(format!("`count` = {n} is out of 1..={MAX_REQUESTS}"))
            }
        };
        let time = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= MAX_REQUEST_OFFSET_US {
                Ok(())
            } else {
                Err(format!(
                    "`{name}` = {v} is out of range: a time in (0, 10^9] µs"
                ))
            }
        };
        match *self {
            Arrivals::Periodic { every_us, count: n } => {
                time("every_us", every_us)?;
                count(n)
            }
            Arrivals::Poisson {
                mean_us, count: n, ..
            } => {
                time("mean_us", mean_us)?;
                count(n)
            }
            Arrivals::Trace { ref at_us } => {
                if at_us.is_empty() || at_us.len() > MAX_REQUESTS as usize {
                    return Err(format!(
                        "`at_us` has {} times: a trace has 1 to {MAX_REQUESTS}",
                        at_us.len()
                    ));
                }
                for (i, &t) in at_us.iter().enumerate() {
                    if !(t.is_finite() && (0.0..=MAX_REQUEST_OFFSET_US).contains(&t)) {
                        return Err(format!(
                            "`at_us[{i}]` = {t} is out of range: a time in [0, 10^9] µs"
                        ));
                    }
                    if i > 0 && t < at_us[i - 1] {
                        return Err(format!(
                            "`at_us[{i}]` = {t} is earlier than the time before it ({}): a trace is in order",
                            at_us[i - 1]
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// Every request's arrival, µs after the process's, in order.
    pub fn times_us(&self) -> Vec<f64> {
        match *self {
            Arrivals::Periodic { every_us, count } => {
                (0..count).map(|k| f64::from(k) * every_us).collect()
            }
            Arrivals::Poisson {
                mean_us,
                count,
                seed,
            } => {
                let mut rng = suite::Rng::new(seed);
                let mut t = 0.0;
                (0..count)
                    .map(|_| {
                        // Uniform in [0, 1) with 53 bits, so 1 - u is in (0, 1].
                        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                        t += -mean_us * (1.0 - u).ln();
                        t
                    })
                    .collect()
            }
            Arrivals::Trace { ref at_us } => at_us.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Arrivals, String> {
        let v: toml::Table = toml::from_str(&format!("r = {text}")).unwrap();
        Arrivals::from_value(v["r"].clone())
    }

    #[test]
    fn periodic_requests_are_evenly_spaced_from_the_arrival() {
        let a = read(r#"{ kind = "periodic", every_us = 2.5, count = 4 }"#).unwrap();
        assert_eq!(a.times_us(), [0.0, 2.5, 5.0, 7.5]);
    }

    #[test]
    fn poisson_requests_are_seeded_and_have_the_mean_gap_asked_for() {
        let a = read(r#"{ kind = "poisson", mean_us = 10.0, count = 20000, seed = 3 }"#).unwrap();
        let t = a.times_us();
        assert_eq!(t, a.times_us(), "the same seed, the same times");
        assert!(t.windows(2).all(|w| w[1] >= w[0]));
        // 20000 exponential gaps of mean 10: the mean is within 3% (about 4 standard
        // errors), and about e^-1 of the gaps exceed the mean.
        let mean = t[t.len() - 1] / t.len() as f64;
        assert!((mean - 10.0).abs() < 0.3, "{mean}");
        let gaps: Vec<f64> = std::iter::once(t[0])
            .chain(t.windows(2).map(|w| w[1] - w[0]))
            .collect();
        let long = gaps.iter().filter(|&&g| g > 10.0).count() as f64 / gaps.len() as f64;
        assert!((long - (-1.0f64).exp()).abs() < 0.02, "{long}");
        let other = read(r#"{ kind = "poisson", mean_us = 10.0, count = 20000, seed = 4 }"#)
            .unwrap()
            .times_us();
        assert_ne!(t, other, "another seed, other times");
    }

    #[test]
    fn bad_arrivals_name_the_value() {
        for (text, want) in [
            (
                r#"{ kind = "periodic", every_us = 0.0, count = 3 }"#,
                "`every_us` = 0 is out of range",
            ),
            (
                r#"{ kind = "periodic", every_us = 1.0, count = 0 }"#,
                "`count` = 0 is out of 1..=100000",
            ),
            (
                r#"{ kind = "poisson", mean_us = nan, count = 3 }"#,
                "`mean_us` = NaN is out of range",
            ),
            (
                r#"{ kind = "poisson", mean_us = 1.0, count = 3, every_us = 2.0 }"#,
                "unknown field `every_us`",
            ),
            (
                r#"{ kind = "poison", mean_us = 1.0, count = 3 }"#,
                "unknown variant `poison`",
            ),
            (r#"{ kind = "trace", at_us = [] }"#, "`at_us` has 0 times"),
            (
                r#"{ kind = "trace", at_us = [1.0, 0.5] }"#,
                "`at_us[1]` = 0.5 is earlier",
            ),
            (
                r#"{ kind = "trace", at_us = [-1.0] }"#,
                "`at_us[0]` = -1 is out of range",
            ),
            (
                r#"{ kind = "periodic", every_us = 1.0 }"#,
                "missing field `count`",
            ),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
