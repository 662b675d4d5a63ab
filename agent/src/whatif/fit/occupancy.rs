//! A thread's time per request, where the recorded execution times leave
//! part of it out: while requests waited every thread was busy, so there
//! a thread spent threads × that time / its dispatches on each. No more
//! than threads × the whole recording / all its dispatches, though: no
//! thread is busier than all the time.

use super::Fit;

/// Fewest dispatches, and least share of the recording, while requests
/// waited, for [`Fit::scale_to_occupancy`] to trust its estimate.
const MIN_SATURATED_DISPATCHES: u64 = 200;
/// Below this ratio of thread time to execution time the recorded
/// executions stand as they are (the estimate's own noise).
const MIN_OCCUPANCY_RATIO: f64 = 1.25;

impl Fit {
    /// nfsd's `execute` times only the procedure: receiving, decoding and
    /// replying hold the thread too. While requests wait every thread is
    /// busy, so there a thread's time per request is threads × that time
    /// / its dispatches. Its ratio to the recorded executions, where that
    /// is clearly above 1 and enough of the recording shows it.
    ///
    /// The periods with requests waiting are not a fair sample of the
    /// recording: a queue builds up the more readily while the threads run
    /// slower (sharing the CPUs with other work), so their time per
    /// request can exceed what the whole recording allows: threads × its
    /// span / its dispatches, the time per request had every thread been
    /// busy throughout. Capped there, the model's server is never slower
    /// than the recorded one demonstrably was.
    pub fn occupancy_ratio(&self, threads: u32) -> Option<f64> {
        if self.saturated_dispatches < MIN_SATURATED_DISPATCHES
            || self.saturated_ns < self.span_ns / 10
            || self.mean_service_ns <= 0.0
        {
            return None;
        }
        let threads = f64::from(threads);
        let waiting = threads * self.saturated_ns as f64 / self.saturated_dispatches as f64;
        let whole = threads * self.span_ns as f64 / self.dispatches.max(1) as f64;
        let k = waiting.min(whole) / self.mean_service_ns;
        (k.is_finite() && k >= MIN_OCCUPANCY_RATIO).then_some(k)
    }

    /// Scales every service time by [`Fit::occupancy_ratio`] (for a fit
    /// whose completions were recorded, not estimated: an estimated one is
    /// fitted again with [`super::Fitter::with_estimated_completions_scaled`], so
    /// that its think times start from the later completions). Returns
    /// the scale applied.
    pub fn scale_to_occupancy(&mut self, threads: u32) -> Option<f64> {
        let k = self.occupancy_ratio(threads)?;
        let scale = |v: &mut Vec<u64>| v.iter_mut().for_each(|x| *x = (*x as f64 * k) as u64);
        for t in &mut self.transports {
            scale(&mut t.service_ns);
        }
        self.mean_service_ns *= k;
        scale(&mut self.pooled_service_ns);
        Some(k)
    }
}
