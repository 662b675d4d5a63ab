//! The memory the snapshots' JSON encodings may hold at once, all of them
//! together: the shared encodings of each view, those made for one client
//! alone, and every one still held by a response or stream that has not
//! been written out yet.
//!
//! Each encoding is charged for the bytes it allocates while it is being
//! written ([`Budgeted`] asks before every allocation), and its charge goes
//! with the bytes ([`Budgeted::finish`]): it is given back only when the
//! last holder drops them, however many responses shared them and however
//! slowly their clients read. So a client cannot hold more than the budget
//! by asking for many views or by never reading: an encoding that does not
//! fit is refused ([`OverBudget`]), and its request gets a 503 instead of
//! waiting. Waiting would bound nothing more (the bytes come back only as
//! slow clients read, or at their write timeout) and would hold the
//! connection and a lane of the encoder meanwhile.
//!
//! Not charged: the snapshot itself (the pipeline's), and the short-lived
//! list of references a view sorts, a few bytes an entity.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;

/// 1 GiB: ten full encodings of 50,000 peers (about 100 MB each).
pub const DEFAULT_BUDGET_MIB: usize = 1024;
pub const MIB: usize = 1 << 20;

/// Bytes of JSON held at once, at most.
#[derive(Debug)]
pub struct BodyBudget {
    limit: usize,
    used: AtomicUsize,
}

/// Bytes taken from a [`BodyBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

/// An encoding did not fit: `needed` more bytes with `used` of `limit`
/// already held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget {
    pub needed: usize,
    pub used: usize,
    pub limit: usize,
}

impl BodyBudget {
    pub fn new(limit: usize) -> Arc<BodyBudget> {
        Arc::new(BodyBudget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }

    /// Take `bytes` more, or none if they do not fit.
    fn take(&self, bytes: usize) -> Result<(), OverBudget> {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                u.checked_add(bytes).filter(|&n| n <= self.limit)
            })
            .map(drop)
            .map_err(|used| OverBudget {
                needed: bytes,
                used,
                limit: self.limit,
            })
    }

    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// An empty charge, to grow.
    pub fn charge(self: &Arc<Self>) -> Charge {
        Charge {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

impl Charge {
    /// Make the charge `bytes`: more if they fit, or less.
    pub fn resize(&mut self, bytes: usize) -> Result<(), OverBudget> {
        if bytes > self.bytes {
            self.budget.take(bytes - self.bytes)?;
        } else {
            self.budget.give(self.bytes - bytes);
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

/// A buffer that grows only within its charge: a write that would need
/// more than the budget has fails (and `over` says why).
pub struct Budgeted {
    buf: Vec<u8>,
    charge: Charge,
    pub over: Option<OverBudget>,
}

/// The buffer and its charge, together for as long as any [`Bytes`] of
/// them lives.
struct Owned {
    buf: Vec<u8>,
    _charge: Charge,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Budgeted {
    /// A buffer of `capacity` bytes (the expected size, so that it is
    /// allocated once), if they fit.
    pub fn with_capacity(
        budget: &Arc<BodyBudget>,
        capacity: usize,
    ) -> Result<Budgeted, OverBudget> {
        let mut charge = budget.charge();
        charge.resize(capacity)?;
        Ok(Budgeted {
            buf: Vec::with_capacity(capacity),
            charge,
            over: None,
        })
    }

    /// The bytes, trimmed to their length; the charge follows them.
    pub fn finish(mut self) -> Bytes {
        self.buf.shrink_to_fit();
        // Less than charged: cannot fail.
        let _ = self.charge.resize(self.buf.capacity());
        Bytes::from_owner(Owned {
            buf: self.buf,
            _charge: self.charge,
        })
    }
}

impl io::Write for Budgeted {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let need = self.buf.len() + data.len();
        if need > self.buf.capacity() {
            // A quarter more each time: the guess was short, likely not
            // by much.
            let cap = need.max(self.buf.capacity() + self.buf.capacity() / 4);
            if let Err(e) = self.charge.resize(cap) {
                self.over = Some(e);
                return Err(io::Error::other("over the response memory budget"));
            }
            self.buf.reserve_exact(cap - self.buf.len());
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn charges_are_bounded_and_given_back_by_the_last_holder() {
        let b = BodyBudget::new(1000);
        let mut w = Budgeted::with_capacity(&b, 600).unwrap();
        assert_eq!(b.used(), 600);
        assert_eq!(
            Budgeted::with_capacity(&b, 500).err(),
            Some(OverBudget {
                needed: 500,
                used: 600,
                limit: 1000
            })
        );
        w.write_all(&[b'x'; 300]).unwrap();
        let bytes = w.finish();
        assert_eq!(b.used(), 300, "trimmed to what was written");
        let (a, c) = (bytes.clone(), bytes.slice(10..20));
        drop(bytes);
        drop(a);
        assert_eq!(b.used(), 300, "a slice still holds it");
        drop(c);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_short_guess_grows_within_the_budget_and_fails_past_it() {
        let b = BodyBudget::new(1000);
        let mut w = Budgeted::with_capacity(&b, 100).unwrap();
        w.write_all(&[b'x'; 400]).unwrap();
        assert!(b.used() >= 400 && b.used() <= 1000);
        assert!(w.write_all(&[b'x'; 700]).is_err());
        assert_eq!(w.over.map(|o| o.limit), Some(1000));
        assert!(b.used() <= 1000);
        drop(w);
        assert_eq!(b.used(), 0);
    }
}
