//! A fixed-size uniform sample of a stream: how the fit keeps every
//! distribution in bounded memory.

/// A uniform sample of at most `cap` values of a stream (Algorithm R,
/// with a fixed-seed generator so that a fit is reproducible).
#[derive(Clone, Debug)]
pub struct Reservoir<T> {
    items: Vec<T>,
    seen: u64,
    cap: usize,
    rng: u64,
}

impl<T: Copy> Reservoir<T> {
    pub fn new(cap: usize, seed: u64) -> Self {
        Reservoir {
            items: Vec::new(),
            seen: 0,
            cap,
            rng: seed | 1,
        }
    }

    pub fn push(&mut self, x: T) {
        self.seen += 1;
        if self.items.len() < self.cap {
            self.items.push(x);
            return;
        }
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % self.seen;
        if let Some(slot) = self.items.get_mut(r as usize) {
            *slot = x;
        }
    }

    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Values offered, kept or not.
    pub fn seen(&self) -> u64 {
        self.seen
    }
}
